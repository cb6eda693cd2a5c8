package anthropic

import (
	"context"
	"iter"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/batchagent/batchagent/llm"
)

// Stream sends req as one streamed Messages call. The sequence yields an
// llm.EventRateLimit first when the response reports rate limits, then text
// and tool-call pieces as they arrive, then llm.EventUsage and llm.EventDone.
// A failure ends the sequence with an *llm.APIError (llm.ErrConnection when
// the stream ends before message_stop), or ctx's error once ctx is done.
// Breaking out of the loop closes the response body. req is not modified;
// each iteration of the sequence makes at most one HTTP request.
//
// A tool call's llm.EventToolCallDone comes at its block's
// content_block_stop (or at message_stop, for a block the server did not
// stop).
//
// Structured output (the output tool's input) arrives as one text event
// once the tool's input is complete, so that it is compact JSON like
// Generate's; text is then held back until the end, since the output
// tool's input replaces it. An output call beside calls of real tools is
// dropped, as in Generate.
//
// The call runs on a stack of its own (llm.OnOwnStack), so that the SDK's
// frames do not grow the calling agent's goroutine stack.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return llm.OnOwnStack(m.stream(ctx, req))
}

// stream is Stream on the calling goroutine.
func (m *Model) stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		c, err := m.translate(req)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		var x exchange
		stream := m.open(ctx, c, &x)
		defer stream.Close()
		if stream.Err() == nil && x.resp != nil {
			if rl := rateLimit(x.resp.Header, time.Now()); rl != nil {
				if !yield(llm.Event{Type: llm.EventRateLimit, RateLimit: rl}, nil) {
					return
				}
			}
		}
		s := streamState{call: c, blocks: make(map[int64]*block), maxTokens: int(c.params.MaxTokens)}
		ev := newEvent()
		for stream.Next() {
			current(stream, ev)
			done, ok := s.handle(ev, yield)
			if !ok || done {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Event{}, m.callError(ctx, &x, err))
			return
		}
		if err := ctx.Err(); err != nil {
			yield(llm.Event{}, err)
			return
		}
		yield(llm.Event{}, m.newError(0, "connection failed: the stream ended before message_stop", llm.ErrConnection, 0))
	}
}

// open sends the streaming call c, its response recorded in x, and
// returns its stream. It is apart from Stream's sequence, whose frame is
// on the calling agent's stack all through the stream: the request body
// is passed by value, and the events (5 KB each) are read into the heap,
// so that the frame stays small.
//
//go:noinline
func (m *Model) open(ctx context.Context, c *call, x *exchange) *ssestream.Stream[sdk.MessageStreamEventUnion] {
	return m.client.Messages.NewStreaming(ctx, c.params, c.options(x.option())...)
}

// newEvent returns a new event on the heap: allocated in Stream's
// sequence, which keeps it, the compiler would put it (5 KB) in its frame.
//
//go:noinline
func newEvent() *sdk.MessageStreamEventUnion { return new(sdk.MessageStreamEventUnion) }

// current sets *ev to stream's current event. The copy's temporary (5
// KB) is in this frame, not in Stream's sequence's.
//
//go:noinline
func current(stream *ssestream.Stream[sdk.MessageStreamEventUnion], ev *sdk.MessageStreamEventUnion) {
	*ev = stream.Current()
}

// block is the state of one content block of a streamed answer.
type block struct {
	kind blockKind
	// tool is the index of a tool call among the answer's calls.
	tool int
	// input is the start's input of a tool call, sent when no delta
	// follows; for the output tool, the whole input so far.
	input []byte
	// deltas says input_json_delta pieces arrived.
	deltas bool
	// closed says the block's content_block_stop came: a tool call's
	// llm.EventToolCallDone was sent.
	closed bool
}

type blockKind int

const (
	otherBlock blockKind = iota
	textBlock
	toolBlock
	outputBlock
)

// streamState turns the events of a stream into llm.Events.
type streamState struct {
	call   *call
	blocks map[int64]*block // by content block index
	calls  int              // tool calls started
	tools  []*block         // the blocks of tool calls, in call order
	// held is the text of an answer with structured output, held until it
	// is known whether the output tool answered.
	held []byte
	// output is the block of the output tool, once started.
	output *block
	usage  struct{ input, cacheRead, cacheCreation, output int64 }
	stop   sdk.StopReason
	// maxTokens is the request's token cap; holding is the size of held and
	// of the output tool's input, capped at llm.AnswerLimit(maxTokens).
	maxTokens, holding int
}

// hold reports whether n more bytes may be held back; when not, it
// yields an error wrapping llm.ErrTruncated: the server did not stop at
// the token cap.
func (s *streamState) hold(n int, yield func(llm.Event, error) bool) bool {
	limit := llm.AnswerLimit(s.maxTokens)
	if s.holding+n > limit {
		se := &llm.SizeError{Limit: int64(limit), MaxTokens: s.maxTokens}
		yield(llm.Event{}, &llm.APIError{Backend: backendName, Message: se.Error(), Err: llm.ErrTruncated})
		return false
	}
	s.holding += n
	return true
}

// handle folds one event into s and yields what it completes. done says
// the stream is over (message_stop); ok is false when yield asked to stop.
func (s *streamState) handle(ev *sdk.MessageStreamEventUnion, yield func(llm.Event, error) bool) (done, ok bool) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.usage.input, s.usage.cacheRead, s.usage.cacheCreation, s.usage.output =
			u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens
	case "content_block_start":
		return false, s.start(ev, yield)
	case "content_block_delta":
		b := s.blocks[ev.Index]
		if b == nil {
			return false, true
		}
		switch ev.Delta.Type {
		case "text_delta":
			return false, s.text(b, ev.Delta.Text, yield)
		case "input_json_delta":
			if ev.Delta.PartialJSON == "" {
				return false, true
			}
			switch b.kind {
			case outputBlock:
				if !s.hold(len(ev.Delta.PartialJSON), yield) {
					return false, false
				}
				if !b.deltas {
					b.input = b.input[:0]
				}
				b.deltas = true
				b.input = append(b.input, ev.Delta.PartialJSON...)
			case toolBlock:
				b.deltas = true
				return false, yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: b.tool, Arguments: ev.Delta.PartialJSON}}, nil)
			}
		}
	case "content_block_stop":
		if b := s.blocks[ev.Index]; b != nil {
			return false, s.close(b, yield)
		}
	case "message_delta":
		if ev.Delta.JSON.StopReason.Valid() {
			s.stop = ev.Delta.StopReason
		}
		// Counts here are totals for the whole message: they replace.
		u := ev.Usage
		if u.JSON.OutputTokens.Valid() {
			s.usage.output = u.OutputTokens
		}
		if u.JSON.InputTokens.Valid() {
			s.usage.input = u.InputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			s.usage.cacheRead = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			s.usage.cacheCreation = u.CacheCreationInputTokens
		}
	case "message_stop":
		return true, s.finish(yield)
	}
	return false, true
}

// close ends a tool call's block: it yields the call's input when no
// delta came, then llm.EventToolCallDone. Other blocks, and a block
// closed before, yield nothing.
func (s *streamState) close(b *block, yield func(llm.Event, error) bool) bool {
	if b.kind != toolBlock || b.closed {
		return true
	}
	b.closed = true
	if !b.deltas && len(b.input) > 0 {
		b.deltas = true
		if !yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: b.tool, Arguments: string(b.input)}}, nil) {
			return false
		}
	}
	return yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: b.tool}}, nil)
}

// start opens a content block.
func (s *streamState) start(ev *sdk.MessageStreamEventUnion, yield func(llm.Event, error) bool) bool {
	cb := ev.ContentBlock
	b := &block{}
	s.blocks[ev.Index] = b
	switch cb.Type {
	case "text":
		b.kind = textBlock
		return s.text(b, cb.Text, yield)
	case "tool_use":
		var input []byte
		if raw := []byte(cb.JSON.Input.Raw()); isObject(raw) {
			input = raw
		}
		if s.call.output != "" && cb.Name == s.call.output {
			if s.output == nil { // the first answer counts
				b.kind, b.input = outputBlock, input
				s.output = b
			}
			return true
		}
		if string(input) == "{}" {
			input = nil // the usual start: deltas follow
		}
		b.kind, b.tool, b.input = toolBlock, s.calls, input
		s.calls++
		s.tools = append(s.tools, b)
		return yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: b.tool, ID: cb.ID, Name: cb.Name}}, nil)
	}
	return true
}

// text yields a piece of text, or holds it when the request asks for
// structured output.
func (s *streamState) text(b *block, t string, yield func(llm.Event, error) bool) bool {
	if b.kind != textBlock || t == "" {
		return true
	}
	if s.call.output != "" {
		if !s.hold(len(t), yield) {
			return false
		}
		s.held = append(s.held, t...)
		return true
	}
	return yield(llm.Event{Type: llm.EventText, Text: t}, nil)
}

// finish yields the structured answer (or the held text), the usage and
// the end of the stream.
func (s *streamState) finish(yield func(llm.Event, error) bool) bool {
	for _, b := range s.tools { // blocks the server did not stop
		if !s.close(b, yield) {
			return false
		}
	}
	switch {
	case s.output != nil && s.calls == 0: // else dropped, as in Generate
		if !yield(llm.Event{Type: llm.EventText, Text: outputText(s.output.input, s.call.wrapped)}, nil) {
			return false
		}
	case len(s.held) > 0:
		if !yield(llm.Event{Type: llm.EventText, Text: string(s.held)}, nil) {
			return false
		}
	}
	u := usageOf(s.usage.input, s.usage.cacheRead, s.usage.cacheCreation, s.usage.output)
	if !yield(llm.Event{Type: llm.EventUsage, Usage: u}, nil) {
		return false
	}
	return yield(llm.Event{Type: llm.EventDone, FinishReason: finishReason(s.stop, s.calls > 0)}, nil)
}
