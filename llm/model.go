package llm

import (
	"context"
	"encoding/json"
	"iter"
)

// Model generates the next assistant message for a conversation.
// Implementations must be safe for concurrent use.
type Model interface {
	// Generate returns the next assistant message for req. Failures of the
	// backend are reported as *APIError wrapping a class sentinel; a
	// cancelled ctx yields ctx's error.
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// A Streamer is a Model that can also stream. Callers discover it with a type
// assertion, like http.Flusher. Breaking out of the loop over the sequence
// releases the underlying connection.
type Streamer interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[Event, error]
}

// EventType says what an [Event] carries.
type EventType int

// The kinds of streamed events.
const (
	// EventText carries a piece of the assistant's text in Text.
	EventText EventType = iota + 1
	// EventToolCall carries a piece of a tool call in ToolCall. Pieces with
	// the same Index belong to the same call; ID and Name arrive on the first.
	EventToolCall
	// EventUsage carries the call's token counts in Usage.
	EventUsage
	// EventDone ends the stream and carries FinishReason.
	EventDone
	// EventRateLimit carries the rate limits the backend reported in
	// RateLimit, before the first token.
	EventRateLimit
	// EventToolCallDone says that the arguments of the tool call with
	// ToolCall.Index are complete (its other fields are empty), so the
	// call may be executed while the stream goes on. Backends that stream
	// tool calls send it once per call, as soon as they see the call end
	// and at the latest before EventUsage and EventDone. A server that
	// breaks its protocol may still send pieces of the call after it:
	// they come as EventToolCall like any other, so a consumer that
	// executed the call early compares it with the call of the whole
	// response. A consumer that needs only the whole response may ignore
	// it.
	EventToolCallDone
	// EventExtra carries, in Extra, members of the answer that no other
	// event holds (a chunk's logprobs, system_fingerprint), before the
	// events of the same chunk. A consumer that does not pass answers on
	// verbatim may ignore it. Events may share one Extra (a stream's
	// repeated system_fingerprint): a consumer does not modify it.
	EventExtra
)

// An Event is one piece of a streamed response.
type Event struct {
	Type         EventType
	Text         string
	ToolCall     ToolCallDelta
	Usage        Usage
	FinishReason FinishReason
	RateLimit    *RateLimitInfo
	Extra        *Extra
}

// A ToolCallDelta is a piece of a streamed tool call.
type ToolCallDelta struct {
	// Index orders the calls of one response.
	Index int
	ID    string
	Name  string
	// Arguments is the next fragment of the JSON arguments text.
	Arguments string
}

// An Accumulator reassembles streamed events into a [Response]. The zero
// value is ready to use. It is not safe for concurrent use.
type Accumulator struct {
	// Limit caps the bytes of text and tool calls held, so that a
	// server streaming without end cannot exhaust memory; see
	// [AnswerLimit]. Zero means no cap.
	Limit int
	// MaxTokens is the token cap of the request, named in the error of a
	// reached Limit.
	MaxTokens int

	size   int // bytes of text, arguments and calls held; see Add
	text   []byte
	calls  []toolCallBuf
	byIdx  map[int]int // tool-call index → position in calls
	usage  Usage
	finish FinishReason
	limit  *RateLimitInfo
	extra  *Extra
}

// callOverhead is what a tool call counts against Accumulator.Limit
// beyond its ID, name and arguments.
const callOverhead = 64

type toolCallBuf struct {
	index    int
	id, name string
	args     []byte
}

// Add folds one event into the response being built. Once the text,
// tool-call arguments and calls held would exceed Limit, it keeps nothing
// of the event and returns a *[SizeError] (wrapping [ErrTruncated]): the
// caller should stop reading the stream. Each call counts its ID and name
// and a fixed overhead of 64 bytes, so that endless empty calls are
// capped too.
func (a *Accumulator) Add(ev Event) error {
	var (
		b *toolCallBuf
		n int // bytes the event adds
	)
	switch ev.Type {
	case EventText:
		n = len(ev.Text)
	case EventToolCall:
		d := ev.ToolCall
		b = a.call(d.Index)
		n = len(d.Arguments)
		if b == nil {
			n += len(d.ID) + len(d.Name) + callOverhead
		}
	}
	if a.Limit > 0 && n > 0 {
		if a.size+n > a.Limit {
			return &SizeError{Limit: int64(a.Limit), MaxTokens: a.MaxTokens}
		}
		a.size += n
	}
	switch ev.Type {
	case EventText:
		a.text = append(a.text, ev.Text...)
	case EventToolCall:
		d := ev.ToolCall
		if b == nil {
			if a.byIdx == nil {
				a.byIdx = make(map[int]int)
			}
			a.byIdx[d.Index] = len(a.calls)
			a.calls = append(a.calls, toolCallBuf{index: d.Index})
			b = &a.calls[len(a.calls)-1]
		}
		if d.ID != "" {
			b.id = d.ID
		}
		if d.Name != "" {
			b.name = d.Name
		}
		b.args = append(b.args, d.Arguments...)
	case EventUsage:
		a.usage = ev.Usage
	case EventDone:
		a.finish = ev.FinishReason
	case EventRateLimit:
		a.limit = ev.RateLimit
	case EventExtra:
		if a.extra == nil {
			a.extra = &Extra{}
		}
		a.extra.Merge(ev.Extra)
	}
	return nil
}

// ToolCall returns the tool call of the given stream index as assembled so
// far, and its position among the calls of [Accumulator.Response]; ok is
// false when no piece of it has come. Empty arguments are "{}", as in
// Response. The arguments share memory with the Accumulator: they must not
// be modified.
func (a *Accumulator) ToolCall(index int) (pos int, call ToolCall, ok bool) {
	b := a.call(index)
	if b == nil {
		return 0, ToolCall{}, false
	}
	args := json.RawMessage(b.args[:len(b.args):len(b.args)])
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return a.byIdx[index], ToolCall{ID: b.id, Name: b.name, Arguments: args}, true
}

// call returns the call of the given stream index, or nil if none has
// begun. The last call is checked first (a call's fragments usually arrive
// together), then the index map, so that a stream of many calls costs O(1)
// per event.
func (a *Accumulator) call(index int) *toolCallBuf {
	if n := len(a.calls); n > 0 && a.calls[n-1].index == index {
		return &a.calls[n-1]
	}
	if i, ok := a.byIdx[index]; ok {
		return &a.calls[i]
	}
	return nil
}

// Response returns the response assembled so far. A missing finish reason
// is inferred: tool_calls when calls were streamed, else stop.
func (a *Accumulator) Response() *Response {
	r := &Response{
		Message:      Message{Role: RoleAssistant, Content: string(a.text)},
		FinishReason: a.finish,
		Usage:        a.usage,
		RateLimit:    a.limit,
		Extra:        a.extra,
	}
	for _, c := range a.calls {
		args := json.RawMessage(c.args)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	if r.FinishReason == "" {
		r.FinishReason = FinishStop
		if len(r.Message.ToolCalls) > 0 {
			r.FinishReason = FinishToolCalls
		}
	}
	return r
}

// OnOwnStack returns seq run as a coroutine ([iter.Pull2]) whose events
// are handed over to the goroutine ranging over the result. The frames
// seq needs (an SDK's request execution, net/http, the decoding of each
// chunk) then grow the coroutine's stack, which is freed when seq ends,
// instead of the caller's: an agent's goroutine keeps whatever stack it
// grew through all its tool waits. Breaking out of the loop stops seq as
// breaking out of seq itself would. The backends' Stream methods use it.
func OnOwnStack(seq iter.Seq2[Event, error]) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		next, stop := iter.Pull2(seq)
		defer stop()
		for {
			ev, err, ok := next()
			if !ok || !yield(ev, err) {
				return
			}
		}
	}
}
