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
		o.HTTPClient = limitedClient{next: o.HTTPClient, maxTokens: maxTokens}
	}
}

// limitedClient caps the body of every response of next with
// llm.LimitBody.
type limitedClient struct {
	next      bedrockruntime.HTTPClient
	maxTokens int
}

func (c limitedClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(r)
	if resp != nil && resp.Body != nil {
		resp.Body = llm.LimitBody(resp.Body, c.maxTokens)
	}
	return resp, err
}

// truncated returns the *llm.APIError of an answer cut at its size cap,
// or nil when err is not one.
func truncated(err error) error {
	se, ok := errors.AsType[*llm.SizeError](err)
	if !ok {
		return nil
	}
	return &llm.APIError{Backend: backendName, Message: se.Error(), Err: llm.ErrTruncated}
}

// plainBodyClient sends each request with a body that offers Read and
// Close alone. The SDK wraps request bodies in a reader whose WriteTo
// fails with io.EOF once the body is closed, which the SDK does as soon as
// the response has come. net/http's transport, reading past a body's
// length to check that nothing is left, uses WriteTo when it can; it then
// takes that io.EOF for a failed request write and closes the connection
// under the response being read ("use of closed network connection", seen
// against a server that answers at once). Through Read, a closed body is a
// plain end.
type plainBodyClient struct {
	next bedrockruntime.HTTPClient
}

func (c plainBodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloserOnly{r.Body}
	}
	return c.next.Do(r)
}

// readCloserOnly hides every method of its body but Read and Close.
type readCloserOnly struct{ io.ReadCloser }
