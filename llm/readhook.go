package llm

import (
	"context"
	"io"
)

// readHookKey is the context key of WithReadHook.
type readHookKey struct{}

// WithReadHook returns ctx carrying hook, for a Streamer that reads its
// answer from the network to call around those reads: hook(true) before
// each read of the answer's body, which may wait for the network, and
// hook(false) once, when it closes the body (the stream ends, fails, or
// the iteration stops); [HookedBody] does both. A Streamer that calls
// hook(true) once must call it before every read that may wait, until
// hook(false). A caller that writes each event on to a client of its own
// (a gateway) can then hold its writes until the backend would wait, and
// send them in one write, instead of one write per event, without
// delaying any of them behind the network.
//
// The hook runs on the goroutine (or the coroutine, [OnOwnStack]) that
// runs the stream, while the consumer of the stream's events waits in
// its iteration: it must be set only by a consumer that ranges over the
// stream on its own goroutine, not one that hands the stream to others.
// A Streamer that never calls the hook (one that does not read from the
// network, or does not support it) is valid: the consumer then sees no
// hook(true) and must write each event as it comes.
func WithReadHook(ctx context.Context, hook func(reading bool)) context.Context {
	return context.WithValue(ctx, readHookKey{}, hook)
}

// ReadHook returns the hook of WithReadHook in ctx, or nil.
func ReadHook(ctx context.Context) func(reading bool) {
	h, _ := ctx.Value(readHookKey{}).(func(bool))
	return h
}

// HookedBody returns body with the hook of ctx (WithReadHook) called
// around its reads: hook(true) before each Read, until one returns an
// error (io.EOF included: no later Read waits), and hook(false) at the
// first Close. The events decoded from the data of the last Read come
// before hook(false), so that a consumer holds them until the stream ends
// rather than sending each alone. It returns body itself when ctx has no
// hook.
func HookedBody(ctx context.Context, body io.ReadCloser) io.ReadCloser {
	h := ReadHook(ctx)
	if h == nil {
		return body
	}
	return &hookedBody{rc: body, hook: h}
}

// hookedBody is the body of HookedBody.
type hookedBody struct {
	rc     io.ReadCloser
	hook   func(bool)
	ended  bool // a Read returned an error
	closed bool // hook(false) was called
}

func (b *hookedBody) Read(p []byte) (int, error) {
	if b.ended || b.closed {
		return b.rc.Read(p)
	}
	b.hook(true)
	n, err := b.rc.Read(p)
	if err != nil {
		b.ended = true
	}
	return n, err
}

func (b *hookedBody) Close() error {
	if !b.closed {
		b.closed = true
		b.hook(false)
	}
	return b.rc.Close()
}
