package bedrock

import (
	"errors"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/batchagent/batchagent/llm"
)

// limitBody returns a per-call option that reads a non-streamed response
// body no further than llm.BodyLimit(maxTokens): past it, reading fails
// with an *llm.SizeError (a server that ignored the token cap).
func limitBody(maxTokens int) func(*bedrockruntime.Options) {
	return func(o *bedrockruntime.Options) {
		o.HTTPClient = limitedClient{next: o.HTTPClient, limit: llm.BodyLimit(maxTokens), maxTokens: maxTokens}
	}
}

// limitedClient wraps the body of every response of next in a
// limitedBody.
type limitedClient struct {
	next      bedrockruntime.HTTPClient
	limit     int64
	maxTokens int
}

func (c limitedClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &limitedBody{rc: resp.Body, limit: c.limit, maxTokens: c.maxTokens}
	}
	return resp, err
}

// limitedBody fails with an *llm.SizeError once more than limit bytes
// would be read.
type limitedBody struct {
	rc        io.ReadCloser
	limit, n  int64
	maxTokens int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.n >= b.limit {
		// Only more data past the limit is an error, not its end.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, &llm.SizeError{Limit: b.limit, MaxTokens: b.maxTokens}
	}
	n, err := b.rc.Read(p[:min(int64(len(p)), b.limit-b.n)])
	b.n += int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// truncated returns the *llm.APIError of an answer cut at its size cap,
// or nil when err is not one.
func truncated(err error) error {
	se, ok := errors.AsType[*llm.SizeError](err)
	if !ok {
		return nil
	}
	return &llm.APIError{Backend: backendName, Message: se.Error(), Err: llm.ErrTruncated}
}
