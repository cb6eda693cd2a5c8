package respcache

import (
	"context"
	"iter"

	"github.com/batchagent/batchagent/llm"
)

// Wrap returns m answering from the cache: a request answered before gets
// the stored answer (with zero Usage: it costs nothing); any other goes
// to m, and its complete answer is stored. The result is an llm.Streamer,
// llm.Capable and llm.QueueProber when m is, delegating the latter two to
// m; a cached answer streams as one sequence of events.
func (c *Cache) Wrap(m llm.Model) llm.Model {
	base := &model{c: c, next: m}
	var g llm.Model = base
	if s, ok := m.(llm.Streamer); ok {
		g = &streamer{model: base, next: s}
	}
	cp, isC := m.(llm.Capable)
	qp, isQ := m.(llm.QueueProber)
	switch st, isS := g.(*streamer); {
	case isS && isC && isQ:
		return struct {
			*streamer
			llm.Capable
			llm.QueueProber
		}{st, cp, qp}
	case isS && isC:
		return struct {
			*streamer
			llm.Capable
		}{st, cp}
	case isS && isQ:
		return struct {
			*streamer
			llm.QueueProber
		}{st, qp}
	case isS:
		return st
	case isC && isQ:
		return struct {
			*model
			llm.Capable
			llm.QueueProber
		}{base, cp, qp}
	case isC:
		return struct {
			*model
			llm.Capable
		}{base, cp}
	case isQ:
		return struct {
			*model
			llm.QueueProber
		}{base, qp}
	}
	return base
}

// model is a Model answering from the cache.
type model struct {
	c    *Cache
	next llm.Model
}

// key returns the key of req, or "" when req is not to be cached.
func (m *model) key(req *llm.Request) string {
	if !cacheable(req, m.c.cfg.Nondeterministic) {
		return ""
	}
	k, err := Key(req)
	if err != nil {
		m.c.errs.Add(1)
		return ""
	}
	return k
}

// cached returns the stored answer of key with zero usage, counting the
// hit, or nil.
func (m *model) cached(ctx context.Context, key string) *llm.Response {
	if key == "" {
		return nil
	}
	r := m.c.lookup(ctx, key)
	if r == nil {
		return nil
	}
	m.c.hit(ctx, r.Usage)
	r.Usage = llm.Usage{}
	return r
}

// Generate answers req from the cache, or from the wrapped model.
func (m *model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	key := m.key(req)
	if r := m.cached(ctx, key); r != nil {
		return r, nil
	}
	m.c.misses.Add(1)
	r, err := m.next.Generate(ctx, req)
	if err == nil && key != "" {
		m.c.store(ctx, key, r)
	}
	return r, err
}

// streamer is a model whose wrapped model streams.
type streamer struct {
	*model
	next llm.Streamer
}

// Stream streams req's stored answer, or the wrapped model's, storing
// the latter once it has streamed to its end without error.
func (s *streamer) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		key := s.key(req)
		if r := s.cached(ctx, key); r != nil {
			replay(r, yield)
			return
		}
		s.c.misses.Add(1)
		var acc llm.Accumulator
		done := false
		for ev, err := range s.next.Stream(ctx, req) {
			if err == nil && key != "" {
				_ = acc.Add(ev) // no Limit: cannot fail
				done = done || ev.Type == llm.EventDone
			}
			if err != nil {
				key = "" // a failed stream is never stored
			}
			if !yield(ev, err) {
				return // the consumer stopped: the answer may be cut
			}
		}
		if key != "" && done {
			s.c.store(ctx, key, acc.Response())
		}
	}
}

// replay yields r as a stream: its text, its tool calls (each followed
// by its end), usage and the end.
func replay(r *llm.Response, yield func(llm.Event, error) bool) {
	if r.Extra != nil && !yield(llm.Event{Type: llm.EventExtra, Extra: r.Extra}, nil) {
		return
	}
	if r.Message.Content != "" && !yield(llm.Event{Type: llm.EventText, Text: r.Message.Content}, nil) {
		return
	}
	for i, tc := range r.Message.ToolCalls {
		d := llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
		if !yield(llm.Event{Type: llm.EventToolCall, ToolCall: d}, nil) ||
			!yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil) {
			return
		}
	}
	if !yield(llm.Event{Type: llm.EventUsage, Usage: r.Usage}, nil) {
		return
	}
	yield(llm.Event{Type: llm.EventDone, FinishReason: r.FinishReason}, nil)
}
