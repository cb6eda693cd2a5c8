package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// chunkKind says what a [chunk] carries.
type chunkKind int

const (
	chunkText      chunkKind = iota + 1 // Text: a piece of the answer
	chunkToolCall                       // ToolCall: a piece of a tool call
	chunkReasoning                      // Event: agent progress, never buffered as content
	chunkUsage                          // Usage: the tokens of the answer (every turn's, in agent mode)
	chunkFinish                         // Finish: why the answer ended
	chunkExtra                          // Extra: the backend's answer members no other chunk holds
)

// chunk is what a mode yields: structured values, never wire bytes.
type chunk struct {
	kind     chunkKind
	text     string
	toolCall llm.ToolCallDelta
	event    *Event
	usage    llm.Usage
	finish   llm.FinishReason
	extra    *llm.Extra
	// choice is the answer's choice the chunk belongs to: 0 but for a
	// request for n > 1 choices.
	choice int
}

// mode is one way of answering a request: a passthrough model call or an
// agent run. It yields chunks and ends with at most one error; it stops
// its work when ctx ends or the iteration is stopped. It calls admitted
// (from any goroutine: it is safe for concurrent use) once the engine
// admits its work before its first chunk (a passthrough's model call,
// holding a slot); a mode that never calls it is in flight from its
// first chunk.
type mode interface {
	chunks(ctx context.Context, admitted func()) iter.Seq2[chunk, error]
}

// errUsed is returned by a second use of an executor.
var errUsed = errors.New("server: executor used twice")

// errDraining is the cause of a request's context when the server began
// to drain before the request was in flight: it is answered 503 with
// Retry-After, to be sent again elsewhere.
var errDraining = errors.New("server: draining before the request was admitted")

// errGraceOver is the cause of a request's context when the drain's
// time ended before the request did.
var errGraceOver = errors.New("server: stopped at the end of the shutdown grace")

// errClientGone is the cause of a request's context once its client has
// disconnected.
var errClientGone = errors.New("server: client disconnected")

// Where a request stands for a drain (executor.state).
const (
	// waiting: not admitted yet, nothing of its answer come. A drain
	// stops it (stopped), to be answered 503 with Retry-After.
	waiting int32 = iota
	// inFlight: admitted by the engine (the backend works on it, though
	// its first token may not have come), or its first chunk come. A
	// drain lets it finish, within the grace.
	inFlight
	// stopped: stopped by a drain while waiting.
	stopped
)

// begin marks x in flight unless a drain stopped it first, and reports
// whether x is in flight. It is safe to call concurrently with stopWaiting.
func (x *executor) begin() bool {
	return x.state.CompareAndSwap(waiting, inFlight) || x.state.Load() == inFlight
}

// stopWaiting marks x stopped unless it is in flight, and reports whether
// it did: then the drain cancels x's context with errDraining.
func (x *executor) stopWaiting() bool { return x.state.CompareAndSwap(waiting, stopped) }

// executor answers one request: it runs the request's mode and is the one
// place that turns chunks into SSE or into the non-streamed JSON, appends
// [DONE], buffers the assistant's content from the structured chunks,
// reports the span's input and output, and checks for the client's
// disconnection. It is single-use: built per request with the request's
// own parameters.
type executor struct {
	used atomic.Bool
	// state is where the request stands for a drain: waiting, in flight
	// or stopped. It moves once, from waiting.
	state atomic.Int32

	// The request's parameters.
	w            http.ResponseWriter
	gone         <-chan struct{}         // closed when the client disconnects
	cancel       context.CancelCauseFunc // cancels the request's context
	id, model    string
	created      int64
	stream       bool
	includeUsage bool
	input        string // the span's input: the last user message
	tracer       Tracer
	recorder     Recorder
	price        *Price // nil: no cost in the usage

	// Filled while executing.
	content strings.Builder // the assistant's content (choice 0's), from chunkText only
	events  []Event         // reasoning events, for the non-streamed answer
	usage   llm.Usage
	// choices is each choice's state, by index: one but for n > 1.
	choices   []choiceState
	wrote     bool                     // the stream's headers are out
	buf       bytes.Buffer             // one SSE event being written
	rc        *http.ResponseController // x.w's, made at the first flush
	firstByte time.Duration            // time to the first chunk
	// extra is the backend's answer members no other chunk holds: all of
	// them for the non-streamed answer, those not yet written for a stream
	// (they go with its next chunk).
	extra *llm.Extra
}

// choiceState is what the executor holds of one choice of the answer.
type choiceState struct {
	acc      llm.Accumulator  // text and tool calls, for the non-streamed answer
	finish   llm.FinishReason // the finish the mode sent; "": none yet
	begun    bool             // the stream's role chunk of the choice is out
	finished bool             // the choice's finish chunk is out
	nextCall map[int]bool     // tool-call indices whose first delta is out
	// extra is the members of a choice other than the first (logprobs)
	// not yet written; the first's are in executor.extra.
	extra map[string]json.RawMessage
}

// choice returns the state of choice i, growing x.choices to hold it.
func (x *executor) choice(i int) *choiceState {
	if i >= len(x.choices) {
		x.choices = append(x.choices, make([]choiceState, i+1-len(x.choices))...)
	}
	return &x.choices[i]
}

// execute runs m and writes its answer. It returns m's error (also
// written to the client, when it is still there), errClientGone when the
// client went away, or errUsed on a second call.
func (x *executor) execute(ctx context.Context, m mode) error {
	if x.used.Swap(true) {
		return errUsed
	}
	start := time.Now()
	end := func(string, llm.Usage, error) {}
	if x.tracer != nil {
		ctx, end = x.tracer.Request(ctx, x.model, x.input)
	}
	err := x.run(ctx, m, start)
	end(x.content.String(), x.usage, err)
	if x.recorder != nil {
		x.recorder.Call(x.model, x.firstByte, time.Since(start), x.usage, err)
	}
	return err
}

func (x *executor) run(ctx context.Context, m mode, start time.Time) error {
	// The time to first token runs from the request's sending: its
	// admission, where the mode reports one (the slot wait is not the
	// backend's), else the request's start.
	var sent atomic.Int64 // the admission, in ns since start; 0: none
	admitted := func() {
		sent.Store(int64(max(time.Since(start), time.Nanosecond)))
		x.begin() // a drain that stopped x first cancels it
	}
	if !x.stream {
		// Nothing is shown before the answer is whole: a call cut
		// mid-answer may run again on another deployment.
		ctx = llm.WithWholeAnswer(ctx)
	}
	for c, err := range m.chunks(ctx, admitted) {
		// The one disconnection check.
		select {
		case <-x.gone:
			x.cancel(errClientGone)
			return errClientGone
		default:
		}
		if err != nil {
			if c := context.Cause(ctx); ctx.Err() != nil && (errors.Is(c, errDraining) || errors.Is(c, errGraceOver)) {
				err = c // the mode saw only its context cancelled
			}
			x.fail(err)
			return err
		}
		if !x.begin() {
			// A drain stopped x before this first chunk: nothing of it is
			// out, so it is answered 503 whole, and the drain cancels it.
			x.fail(errDraining)
			return errDraining
		}
		if x.firstByte == 0 {
			x.firstByte = max(time.Since(start)-time.Duration(sent.Load()), time.Nanosecond)
		}
		st := x.choice(c.choice)
		switch c.kind {
		case chunkText:
			if c.choice == 0 {
				x.content.WriteString(c.text)
			}
			st.acc.Add(llm.Event{Type: llm.EventText, Text: c.text})
		case chunkToolCall:
			st.acc.Add(llm.Event{Type: llm.EventToolCall, ToolCall: c.toolCall})
		case chunkReasoning:
			if !x.stream {
				x.events = append(x.events, *c.event)
			}
		case chunkUsage:
			x.usage = c.usage
			continue // written after the finish chunk
		case chunkFinish:
			st.finish = c.finish
		case chunkExtra:
			if c.extra == nil {
				continue
			}
			if c.choice > 0 {
				for k, v := range c.extra.Choice {
					if st.extra == nil {
						st.extra = map[string]json.RawMessage{}
					}
					st.extra[k] = llm.MergeMember(st.extra[k], v)
				}
				c.extra = &llm.Extra{Top: c.extra.Top}
			}
			if x.extra == nil {
				x.extra = &llm.Extra{}
			}
			x.extra.Merge(c.extra)
			continue // written with the next chunk, or in the answer
		}
		if x.stream {
			if err := x.writeChunk(c); err != nil {
				x.cancel(errClientGone)
				return errClientGone
			}
		}
	}
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		// The mode stopped without an error because its context ended.
		x.fail(err)
		return err
	}
	if x.stream {
		return x.endStream()
	}
	return x.writeCompletion()
}

// fail reports err to the client: an error status while nothing has
// been written; in a stream already begun, an error event (OpenAI's
// error object as a data line) and no [DONE], whatever the failure — a
// connection cut upstream too — so that no client takes a cut answer for
// a whole one.
func (x *executor) fail(err error) {
	if errors.Is(err, errClientGone) {
		return
	}
	if !x.wrote {
		writeError(x.w, errorOf(err))
		return
	}
	x.buf.Reset()
	x.buf.WriteString("data: ")
	x.buf.Write(errorOf(err).body(x.w.Header().Get(requestIDHeader)))
	x.buf.WriteString("\n\n")
	x.flush()
}

func (x *executor) chunkHead() oaiwire.Chunk {
	sc := oaiwire.Chunk{ID: x.id, Object: "chat.completion.chunk", Created: x.created, Model: x.model}
	if x.includeUsage {
		sc.Usage = oaiwire.Null
	}
	return sc
}

// writeChunk writes c as SSE, preceded by the role chunk on the first
// of its choice.
func (x *executor) writeChunk(c chunk) error {
	if !x.wrote {
		x.wrote = true
		h := x.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		x.w.WriteHeader(http.StatusOK)
	}
	st := x.choice(c.choice)
	if !st.begun {
		st.begun = true
		empty := ""
		x.event(c.choice, oaiwire.Delta{Role: "assistant", Content: &empty}, nil)
	}
	var d oaiwire.Delta
	var finish *string
	switch c.kind {
	case chunkText:
		d.Content = &c.text
	case chunkToolCall:
		tc := c.toolCall
		i := tc.Index
		call := oaiwire.ToolCall{Index: &i, Function: oaiwire.Function{Arguments: tc.Arguments}}
		if st.nextCall == nil {
			st.nextCall = map[int]bool{}
		}
		if !st.nextCall[i] {
			st.nextCall[i] = true
			call.ID, call.Type, call.Function.Name = tc.ID, "function", tc.Name
		}
		d.ToolCalls = []oaiwire.ToolCall{call}
	case chunkReasoning:
		if c.event != nil {
			d.ReasoningContent = c.event.text()
			d.Event, _ = json.Marshal(c.event) // strings, numbers and raw JSON already valid: cannot fail
		}
	case chunkFinish:
		st.finished = true
		f := string(c.finish)
		finish = &f
	}
	x.event(c.choice, d, finish)
	return x.flush()
}

// event appends one chunk event of choice i with d to buf, with the
// extras not yet written: the answer's and the choice's.
func (x *executor) event(i int, d oaiwire.Delta, finish *string) {
	sc := x.chunkHead()
	sc.Choices = []oaiwire.ChunkChoice{{Index: i, Delta: d, FinishReason: finish}}
	var xt *llm.Extra // the extras this chunk carries
	switch {
	case i == 0 && x.extra != nil:
		xt, x.extra = x.extra, nil
	case i > 0:
		st := &x.choices[i]
		if x.extra != nil && len(x.extra.Top) > 0 || len(st.extra) > 0 {
			xt = &llm.Extra{Choice: st.extra}
			if x.extra != nil {
				xt.Top, x.extra.Top = x.extra.Top, nil
			}
			st.extra = nil
		}
	}
	if xt != nil {
		b, _ := json.Marshal(sc) // strings, numbers and raw JSON already valid: cannot fail
		b = withExtra(b, xt)
		x.buf.WriteString("data: ")
		x.buf.Write(b)
		x.buf.WriteString("\n\n")
		return
	}
	// Appended in place: the common text chunk without reflection or a
	// copy.
	x.buf.WriteString("data: ")
	b, _ := sc.AppendJSON(x.buf.AvailableBuffer()) // strings, numbers and raw JSON already valid: cannot fail
	x.buf.Write(b)
	x.buf.WriteString("\n\n")
}

// flush writes buf to the client and flushes it.
func (x *executor) flush() error {
	_, err := x.w.Write(x.buf.Bytes())
	x.buf.Reset()
	if err != nil {
		return err
	}
	if x.rc == nil {
		x.rc = http.NewResponseController(x.w) // one per answer, not per chunk
	}
	return x.rc.Flush()
}

// endStream writes each choice's finish chunk (when the mode sent none),
// the usage chunk when asked for, and [DONE].
func (x *executor) endStream() error {
	x.choice(0)
	for i := range x.choices {
		st := &x.choices[i]
		if st.finished {
			continue
		}
		f := st.acc.Response().FinishReason
		if st.finish != "" {
			f = st.finish
		}
		if err := x.writeChunk(chunk{kind: chunkFinish, finish: f, choice: i}); err != nil {
			return errClientGone
		}
	}
	if x.includeUsage {
		sc := x.chunkHead()
		sc.Choices = []oaiwire.ChunkChoice{}
		sc.Usage = x.wireUsage()
		b, _ := json.Marshal(sc)
		x.buf.WriteString("data: ")
		x.buf.Write(b)
		x.buf.WriteString("\n\n")
	}
	x.buf.WriteString("data: [DONE]\n\n")
	if x.flush() != nil {
		return errClientGone
	}
	return nil
}

// writeCompletion writes the non-streamed answer.
func (x *executor) writeCompletion() error {
	x.choice(0)
	choices := make([]oaiwire.Choice, len(x.choices))
	for i := range x.choices {
		st := &x.choices[i]
		resp := st.acc.Response()
		if st.finish != "" {
			resp.FinishReason = st.finish
		}
		msg := oaiwire.NewReply(resp.Message.Content, resp.Message.ToolCalls)
		msg.Refusal = oaiwire.Null
		choices[i] = oaiwire.Choice{Index: i, Message: msg, FinishReason: string(resp.FinishReason)}
	}
	if len(x.events) > 0 {
		choices[0].Message.Events, _ = json.Marshal(x.events)
	}
	for _, e := range x.events {
		choices[0].Message.ReasoningContent += e.text()
	}
	b, _ := json.Marshal(oaiwire.Completion{
		ID: x.id, Object: "chat.completion", Created: x.created, Model: x.model,
		Choices: choices,
		Usage:   x.wireUsage(),
	})
	if x.extra != nil {
		b = withExtra(b, x.extra)
	}
	if len(x.choices) > 1 {
		b = withChoiceExtras(b, x.choices)
	}
	x.w.Header().Set("Content-Type", "application/json")
	x.wrote = true
	if _, err := x.w.Write(append(b, '\n')); err != nil {
		return errClientGone
	}
	return nil
}

// wireUsage is the answer's usage, with its cost when a price is set.
func (x *executor) wireUsage() *oaiwire.Usage {
	u := oaiwire.NewUsage(x.usage)
	if x.price != nil {
		c := x.price.Cost(x.usage)
		u.Cost = &c
	}
	return u
}

// withChoiceExtras returns b, a completion, with the members each of
// its choices but the first holds in choices set on it, as withExtra
// sets the first's.
func withChoiceExtras(b []byte, choices []choiceState) []byte {
	var top map[string]json.RawMessage
	var wire []map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil || json.Unmarshal(top["choices"], &wire) != nil {
		return b
	}
	changed := false
	for i := 1; i < len(choices) && i < len(wire); i++ {
		for k, v := range choices[i].extra {
			if _, ours := wire[i][k]; !ours || string(wire[i][k]) == "null" {
				wire[i][k], changed = v, true
			}
		}
	}
	if !changed {
		return b
	}
	top["choices"], _ = json.Marshal(wire) // raw members already valid
	out, err := json.Marshal(top)
	if err != nil {
		return b
	}
	return out
}

// withExtra returns b, a completion or a chunk, with x's members set on
// it and on its first choice, replacing the gateway's own (a null
// logprobs). The gateway writes no member an upstream's answer holds but
// in its own terms, so extras (logprobs, system_fingerprint, a vendor's
// fields) go back to the client as the backend sent them.
func withExtra(b []byte, x *llm.Extra) []byte {
	if x.Empty() {
		return b
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return b
	}
	for k, v := range x.Top {
		if _, ours := top[k]; !ours || string(top[k]) == "null" {
			top[k] = v
		}
	}
	if len(x.Choice) > 0 {
		var choices []map[string]json.RawMessage
		if json.Unmarshal(top["choices"], &choices) == nil && len(choices) > 0 {
			for k, v := range x.Choice {
				if _, ours := choices[0][k]; !ours || string(choices[0][k]) == "null" {
					choices[0][k] = v
				}
			}
			top["choices"], _ = json.Marshal(choices) // raw members already valid
		}
	}
	out, err := json.Marshal(top)
	if err != nil {
		return b
	}
	return out
}
