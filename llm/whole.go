package llm

import "context"

// wholeKey is the context key of WithWholeAnswer.
type wholeKey struct{}

// WithWholeAnswer returns ctx marked as the context of a call whose caller
// shows nothing of a streamed answer until it is whole (a gateway
// answering a non-streamed request, say). A Streamer that can start a
// call again elsewhere (package router) may then hold a stream's events
// back until it ends, and start a stream cut mid-answer again on another
// backend, where it must otherwise end with the cut's error.
func WithWholeAnswer(ctx context.Context) context.Context {
	return context.WithValue(ctx, wholeKey{}, true)
}

// WantsWholeAnswer reports whether ctx was marked by WithWholeAnswer.
func WantsWholeAnswer(ctx context.Context) bool {
	v, _ := ctx.Value(wholeKey{}).(bool)
	return v
}
