package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"mime"
	"net/http"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// Stream sends req as a streamed chat completion (with
// stream_options.include_usage) and yields its pieces: an EventRateLimit
// first when the response carried x-ratelimit-* headers, then EventText and
// EventToolCall pieces as they arrive (tool-call arguments in the fragments
// the server sent), each call's EventToolCallDone as soon as its arguments
// are complete (the top-level JSON object of its arguments closed, or the
// choice finished), then EventUsage when the server reported usage, then
// EventDone. A failure ends the sequence with an *llm.APIError, or an error
// wrapping ctx.Err() when ctx ends first; a stream that stops before its
// "data: [DONE]" terminator is ErrConnection, an undecodable chunk
// ErrServer. Breaking out of the loop closes the response body.
//
// The call runs on a stack of its own (llm.OnOwnStack): the calling
// agent's goroutine keeps 4–5 KB of stack instead of 9–11 KB through its
// tool waits (BenchmarkAgentMemory/openai).
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return llm.OnOwnStack(m.stream(ctx, req))
}

// stream is Stream on the calling goroutine.
func (m *Model) stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		body, err := m.body(req, true)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		var raw *http.Response
		if err := m.client.Post(ctx, "chat/completions", body, &raw); err != nil {
			yield(llm.Event{}, m.callError(ctx, raw, err))
			return
		}
		defer raw.Body.Close()
		if rl := rateLimit(raw.Header); rl != nil {
			if !yield(llm.Event{Type: llm.EventRateLimit, RateLimit: rl}, nil) {
				return
			}
		}
		if mt, _, _ := mime.ParseMediaType(raw.Header.Get("Content-Type")); mt == "application/json" {
			// A server that ignored "stream": one whole completion.
			m.replayCompletion(ctx, raw, req.MaxTokens, yield)
			return
		}
		m.readStream(ctx, raw, yield)
	}
}

// streamState is what a stream has told so far beyond its text.
type streamState struct {
	// calls maps the server's tool-call indexes to ours, in order of first
	// appearance. A new ID under an index already used starts a new call:
	// some servers (older Ollama) number every call 0.
	calls []callSlot
	// open is the first of calls that may lack its EventToolCallDone.
	open     int
	finish   string
	usage    llm.Usage
	hasUsage bool
	// extra is the last chunk's extras, sent again while chunks repeat
	// them.
	extra *llm.Extra
}

type callSlot struct {
	wire int64
	id   string
	args argsScan
	done bool // its llm.EventToolCallDone was sent
}

// argsScan follows the arguments text of a streamed call, to tell when its
// top-level JSON object closes: no valid JSON goes on after the brace
// that balances the first, so the call is complete there. Arguments that
// do not begin with an object never close this way.
type argsScan struct {
	state        scanState
	depth        int  // open objects and arrays
	inStr, escap bool // inside a string; after its backslash
}

type scanState uint8

const (
	scanBefore scanState = iota // only whitespace so far
	scanObject                  // inside the top-level object
	scanClosed                  // the object closed
	scanOther                   // not an object: no early close
)

// feed scans the next fragment and reports whether the top-level object
// closed in it.
func (a *argsScan) feed(frag string) bool {
	for i := 0; i < len(frag) && a.state < scanClosed; i++ {
		c := frag[i]
		switch {
		case a.state == scanBefore:
			switch c {
			case ' ', '\t', '\n', '\r':
			case '{':
				a.state, a.depth = scanObject, 1
			default:
				a.state = scanOther
			}
		case a.inStr:
			switch {
			case a.escap:
				a.escap = false
			case c == '\\':
				a.escap = true
			case c == '"':
				a.inStr = false
			}
		case c == '"':
			a.inStr = true
		case c == '{' || c == '[':
			a.depth++
		case c == '}' || c == ']':
			a.depth--
			if a.depth == 0 {
				a.state = scanClosed
				return true
			}
		}
	}
	return false
}

// slot returns our index for a tool-call delta.
func (s *streamState) slot(wire int64, id string) int {
	for i := len(s.calls) - 1; i >= 0; i-- {
		c := &s.calls[i]
		if c.wire != wire {
			continue
		}
		if id == "" || c.id == "" || c.id == id {
			if c.id == "" {
				c.id = id
			}
			return i
		}
		break
	}
	s.calls = append(s.calls, callSlot{wire: wire, id: id})
	return len(s.calls) - 1
}

// closeCalls yields llm.EventToolCallDone for the calls before our index
// end that have not had it, in order. It reports whether the consumer
// wants more.
//
// A call is not closed when a later one begins: some servers interleave
// the fragments of parallel calls, so that would start calls on a part
// of their arguments; and a call whose arguments are one JSON object (as
// all valid ones are) closes with its object anyway.
func (s *streamState) closeCalls(end int, yield func(llm.Event, error) bool) bool {
	for i := s.open; i < end; i++ {
		c := &s.calls[i]
		if c.done {
			continue
		}
		c.done = true
		if !yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil) {
			return false
		}
	}
	s.open = max(s.open, end)
	return true
}

var doneData = []byte("[DONE]")

// readStream decodes the SSE body of raw and yields its events.
func (m *Model) readStream(ctx context.Context, raw *http.Response, yield func(llm.Event, error) bool) {
	dec := ssestream.NewDecoder(raw)
	var st streamState
	done := false
	for !done && dec.Next() {
		ev := dec.Event()
		data := bytes.TrimSpace(ev.Data)
		switch {
		case len(data) == 0:
			continue
		case bytes.Equal(data, doneData):
			done = true
			continue
		case ev.Type == "error":
			yield(llm.Event{}, m.inlineError(data))
			return
		}
		var c oaiwire.ClientChunk
		if err := json.Unmarshal(data, &c); err != nil {
			yield(llm.Event{}, m.errorf(0, llm.ErrServer, "malformed stream chunk: %v", err))
			return
		}
		if c.IsError() {
			yield(llm.Event{}, m.inlineError(data))
			return
		}
		if oaiwire.HasAnswerExtra(data) {
			// Most servers repeat a chunk's extras in the next: the
			// previous Extra, which no consumer changes, is sent again.
			if !oaiwire.SameAnswerExtra(data, st.extra) {
				st.extra, _ = oaiwire.ReadAnswerExtra(data) // data decoded above: a JSON object
			}
			if st.extra != nil && !yield(llm.Event{Type: llm.EventExtra, Extra: st.extra}, nil) {
				return
			}
		}
		if !m.chunkEvents(&st, &c, yield) {
			return
		}
	}
	if !done {
		if err := dec.Err(); err != nil {
			yield(llm.Event{}, m.transportError(ctx, err))
		} else if ctx.Err() != nil {
			yield(llm.Event{}, m.transportError(ctx, ctx.Err()))
		} else {
			yield(llm.Event{}, m.errorf(0, llm.ErrConnection, "stream ended before [DONE]"))
		}
		return
	}
	if !st.closeCalls(len(st.calls), yield) {
		return
	}
	if st.hasUsage && !yield(llm.Event{Type: llm.EventUsage, Usage: st.usage}, nil) {
		return
	}
	yield(llm.Event{Type: llm.EventDone, FinishReason: finishReason(st.finish, len(st.calls) > 0)}, nil)
}

// chunkEvents yields the events of one chunk and records its finish reason
// and usage in st. It reports whether the consumer wants more.
func (m *Model) chunkEvents(st *streamState, c *oaiwire.ClientChunk, yield func(llm.Event, error) bool) bool {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever asked for
		}
		d := &ch.Delta
		text := d.Content
		if text == "" {
			text = d.Refusal
		}
		if text != "" && !yield(llm.Event{Type: llm.EventText, Text: text}, nil) {
			return false
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			if tc.Type != "" && tc.Type != "function" {
				continue
			}
			i := st.slot(tc.Index, tc.ID)
			delta := llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			if !yield(llm.Event{Type: llm.EventToolCall, ToolCall: delta}, nil) {
				return false
			}
			if c := &st.calls[i]; !c.done && c.args.feed(tc.Function.Arguments) {
				c.done = true
				if !yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil) {
					return false
				}
			}
		}
		if ch.FinishReason != "" {
			st.finish = ch.FinishReason
			if !st.closeCalls(len(st.calls), yield) {
				return false
			}
		}
	}
	if u, ok := usage(c.Usage, c.Timings); ok {
		st.usage, st.hasUsage = u, true
	}
	return true
}

// replayCompletion yields the events of a non-streamed completion that
// came back in answer to a streamed request.
func (m *Model) replayCompletion(ctx context.Context, raw *http.Response, maxTokens int, yield func(llm.Event, error) bool) {
	resp, err := m.readCompletion(ctx, raw, maxTokens)
	if err != nil {
		yield(llm.Event{}, err)
		return
	}
	if resp.Extra != nil && !yield(llm.Event{Type: llm.EventExtra, Extra: resp.Extra}, nil) {
		return
	}
	if resp.Message.Content != "" && !yield(llm.Event{Type: llm.EventText, Text: resp.Message.Content}, nil) {
		return
	}
	for i, c := range resp.Message.ToolCalls {
		delta := llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}
		if !yield(llm.Event{Type: llm.EventToolCall, ToolCall: delta}, nil) ||
			!yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil) {
			return
		}
	}
	if !yield(llm.Event{Type: llm.EventUsage, Usage: resp.Usage}, nil) {
		return
	}
	yield(llm.Event{Type: llm.EventDone, FinishReason: resp.FinishReason}, nil)
}
