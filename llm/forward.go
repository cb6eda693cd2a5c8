package llm

import (
	"context"
	"net/http"
)

// Forwarder is a model that answers the OpenAI endpoints other than chat
// completions — "/v1/embeddings" and "/v1/completions" — from the
// request's JSON body as the client sent it. An OpenAI-compatible backend
// sends the body upstream verbatim; the simulator answers it itself.
type Forwarder interface {
	// Forward sends body to path (one of the two above) and returns the
	// successful answer, whose body the caller reads and closes: JSON, or
	// server-sent events when the body asked for a stream. A refusal or
	// a failure is an error (an *APIError where the backend answered or
	// could not be reached), never a response; an endpoint the model
	// does not serve is an *APIError of class ErrBadRequest.
	Forward(ctx context.Context, path string, body []byte) (*http.Response, error)
}
