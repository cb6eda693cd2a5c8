package openai

import (
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// body returns the JSON of the chat/completions request for req, with
// "stream" and "stream_options" when stream is set, written by
// [oaiwire.AppendRequest] into a buffer allocated once.
//
// The body is written there rather than by the SDK, which stays the
// transport (base URL, key, headers, retries, errors): the SDK's encoder
// walks its parameter types by reflection, 10× the time and 500× the
// allocations (BenchmarkRequestBody). TestBodyMatchesSDK and
// FuzzBodyMatchesSDK hold the two encodings equal as JSON values.
func (m *Model) body(req *llm.Request, stream bool) ([]byte, error) {
	if req == nil {
		return nil, m.errorf(0, llm.ErrBadRequest, "nil request")
	}
	o := oaiwire.RequestOptions{Model: req.Model, MaxCompletionTokens: m.maxTokensV2, Stream: stream}
	if o.Model == "" {
		o.Model = m.model
	}
	if o.Model == "" && m.maxTokensV2 {
		return nil, m.errorf(0, llm.ErrBadRequest, "no model: set Config.Model or Request.Model")
	}
	b, err := oaiwire.AppendRequest(make([]byte, 0, oaiwire.RequestSize(req)), req, o)
	if err != nil {
		return nil, m.errorf(0, llm.ErrBadRequest, "%v", err)
	}
	return b, nil
}
