package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// DefaultDimensions is the length of the simulator's embeddings when the
// request names no "dimensions".
const DefaultDimensions = 256

// Forward implements [llm.Forwarder], offline: "/v1/embeddings" answers
// deterministic unit vectors, each a function of its input's text alone
// (a hash of it seeds the components; "dimensions" sets their number,
// "encoding_format" "base64" packs them as little-endian float32), and
// "/v1/completions" answers the prompt's completion as a chat call with
// the prompt as its user message would (streamed as server-sent events
// when "stream" is true). A malformed body is an *llm.APIError of class
// ErrBadRequest naming the field.
func (m *Model) Forward(ctx context.Context, path string, body []byte) (*http.Response, error) {
	switch path {
	case "/v1/embeddings":
		return m.embeddings(body)
	case "/v1/completions":
		return m.completions(ctx, body)
	}
	return nil, simBad("the simulator does not serve %s", path)
}

func simBad(format string, args ...any) error {
	return &llm.APIError{Backend: "sim", StatusCode: 400, Message: fmt.Sprintf(format, args...), Err: llm.ErrBadRequest}
}

// texts reads a string-or-array field (an embedding's input, a
// completion's prompt): a string, an array of strings, an array of
// token ids or an array of such arrays (token ids are read as their
// decimal text).
func texts(field string, raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []string{idsText(ids)}, nil
	}
	var idss [][]int64
	if json.Unmarshal(raw, &idss) == nil && len(idss) > 0 {
		out := make([]string, len(idss))
		for i, ids := range idss {
			out[i] = idsText(ids)
		}
		return out, nil
	}
	return nil, simBad("%s must be a string, a non-empty array of strings, or token ids", field)
}

func idsText(ids []int64) string {
	var b []byte
	for i, id := range ids {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

func (m *Model) embeddings(body []byte) (*http.Response, error) {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		Dimensions     *int            `json:"dimensions"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, simBad("the body is not an embeddings request: %v", err)
	}
	if len(req.Input) == 0 {
		return nil, simBad("input is required")
	}
	in, err := texts("input", req.Input)
	if err != nil {
		return nil, err
	}
	dims := DefaultDimensions
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > 8192 {
			return nil, simBad("dimensions must be between 1 and 8192, not %d", *req.Dimensions)
		}
		dims = *req.Dimensions
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		return nil, simBad("encoding_format must be float or base64, not %q", req.EncodingFormat)
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: make([]item, len(in)), Model: req.Model}
	for i, s := range in {
		v := Embedding(s, dims)
		var e any = v
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			e = base64.StdEncoding.EncodeToString(b)
		}
		out.Data[i] = item{Object: "embedding", Index: i, Embedding: e}
		out.Usage.PromptTokens += Tokens(len(s))
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return answer("application/json", b), nil
}

// Embedding returns the simulator's embedding of text: dims components of
// a unit vector that depends on text alone.
func Embedding(text string, dims int) []float32 {
	v := make([]float32, dims)
	x := hashString(text) | 1
	var norm float64
	for i := range v {
		// xorshift64*: a stable stream of components in [-1, 1).
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		f := float64((x*2685821657736338717)>>11)/float64(1<<53)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	if norm = math.Sqrt(norm); norm > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / norm)
		}
	}
	return v
}

func (m *Model) completions(ctx context.Context, body []byte) (*http.Response, error) {
	var req struct {
		Model       string          `json:"model"`
		Prompt      json.RawMessage `json:"prompt"`
		MaxTokens   *int            `json:"max_tokens"`
		Temperature *float64        `json:"temperature"`
		Stream      bool            `json:"stream"`
		N           *int            `json:"n"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, simBad("the body is not a completions request: %v", err)
	}
	if len(req.Prompt) == 0 {
		return nil, simBad("prompt is required")
	}
	prompts, err := texts("prompt", req.Prompt)
	if err != nil {
		return nil, err
	}
	if req.N != nil && *req.N != 1 {
		return nil, simBad("n: only n=1 is supported by the simulator")
	}
	if req.MaxTokens != nil && *req.MaxTokens < 0 {
		return nil, simBad("max_tokens must not be negative")
	}
	type choice struct {
		Text         string  `json:"text"`
		Index        int     `json:"index"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	type usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	}
	id := fmt.Sprintf("cmpl-sim%x", hashString(string(body)))
	created := time.Now().Unix()
	var (
		choices []choice
		u       usage
	)
	for i, p := range prompts {
		lr := &llm.Request{Model: req.Model, Messages: []llm.Message{{Role: llm.RoleUser, Content: p}}, Temperature: req.Temperature}
		if req.MaxTokens != nil {
			lr.MaxTokens = *req.MaxTokens
		}
		resp, err := m.Generate(ctx, lr)
		if err != nil {
			return nil, err
		}
		fr := "stop"
		if resp.FinishReason == llm.FinishLength {
			fr = "length"
		}
		choices = append(choices, choice{Text: resp.Message.Content, Index: i, FinishReason: &fr})
		u.PromptTokens += resp.Usage.PromptTokens
		u.CompletionTokens += resp.Usage.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	type object struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
	}
	if !req.Stream {
		b, err := json.Marshal(object{ID: id, Object: "text_completion", Created: created, Model: req.Model, Choices: choices, Usage: &u})
		if err != nil {
			return nil, err
		}
		return answer("application/json", b), nil
	}
	// Streamed: each choice's text in one event, then its finish, then
	// the usage, then [DONE].
	var sse bytes.Buffer
	event := func(o object) {
		b, _ := json.Marshal(o)
		sse.WriteString("data: ")
		sse.Write(b)
		sse.WriteString("\n\n")
	}
	for _, c := range choices {
		fr := c.FinishReason
		c.FinishReason = nil
		event(object{ID: id, Object: "text_completion", Created: created, Model: req.Model, Choices: []choice{c}})
		event(object{ID: id, Object: "text_completion", Created: created, Model: req.Model, Choices: []choice{{Index: c.Index, FinishReason: fr}}})
	}
	event(object{ID: id, Object: "text_completion", Created: created, Model: req.Model, Choices: []choice{}, Usage: &u})
	sse.WriteString("data: [DONE]\n\n")
	return answer("text/event-stream", sse.Bytes()), nil
}

// answer is a 200 response of contentType holding b.
func answer(contentType string, b []byte) *http.Response {
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {contentType}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
	}
}
