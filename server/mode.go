package server

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// passthrough answers with one model call through the backend's
// admission, in its class (interactive for a chat completion, batch for
// a line of a batch).
type passthrough struct {
	engine  *batchagent.Engine
	backend batchagent.Backend
	class   batchagent.Priority
	req     *llm.Request
}

func (p *passthrough) chunks(ctx context.Context, admitted func()) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		for ev, err := range p.engine.Call(ctx, p.backend, p.class, p.req, &batchagent.CallOptions{OnAdmit: admitted}) {
			if err != nil {
				yield(chunk{}, err)
				return
			}
			var c chunk
			switch ev.Type {
			case llm.EventText:
				if ev.Text == "" {
					continue
				}
				c = chunk{kind: chunkText, text: ev.Text}
			case llm.EventToolCall:
				c = chunk{kind: chunkToolCall, toolCall: ev.ToolCall}
			case llm.EventUsage:
				c = chunk{kind: chunkUsage, usage: ev.Usage}
			case llm.EventDone:
				c = chunk{kind: chunkFinish, finish: ev.FinishReason}
			case llm.EventExtra:
				if ev.Extra == nil {
					continue
				}
				if len(ev.Extra.Choices) > 0 {
					// The other choices of an answer to n > 1.
					for _, raw := range ev.Extra.Choices {
						cs, _ := choiceChunks(raw)
						for _, c := range cs {
							if !yield(c, nil) {
								return
							}
						}
					}
					rest := *ev.Extra
					rest.Choices = nil
					if rest.Empty() {
						continue
					}
					ev.Extra = &rest
				}
				c = chunk{kind: chunkExtra, extra: ev.Extra}
			default:
				continue
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// agentInput forms an agent's input from a request: the text of the last
// user message. A text that is a JSON object gives the input its fields;
// any other text is the input's one field "input". The message's media
// (images, audio, files), in order, are returned apart: the agent's task
// carries them after its text.
func agentInput(cr *oaiwire.Request) (batchagent.Input, []llm.Part, *apiError) {
	for i := len(cr.Messages) - 1; i >= 0; i-- {
		m := &cr.Messages[i]
		if m.Role != "user" {
			continue
		}
		text, parts, err := m.Parts()
		if err != nil {
			return nil, nil, contentError(i, err)
		}
		var media []llm.Part
		if len(parts) > 0 {
			text = partsText(parts)
			media = make([]llm.Part, 0, len(parts))
			for _, p := range parts {
				if p.Kind != llm.PartText {
					media = append(media, p)
				}
			}
		}
		if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") {
			var in batchagent.Input
			if json.Unmarshal([]byte(t), &in) == nil {
				// Last-wins would drop one of two values for a key, as
				// `batchagent run` refuses to for an input line.
				if je := oaiwire.CheckJSON([]byte(t)); je != nil {
					param := fmt.Sprintf("messages[%d].content", i)
					return nil, nil, badParam(param, fmt.Sprintf("%s: the agent's input (a JSON object): %v", param, je))
				}
				return in, media, nil
			}
		}
		return batchagent.Input{"input": text}, media, nil
	}
	return nil, nil, badParam("messages", "agent mode needs a user message")
}

// partsText returns the text of parts: their text parts, joined.
func partsText(parts []llm.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == llm.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// agentRun answers with an agent's run: its progress as reasoning chunks,
// then its answer as content and the usage of every turn.
type agentRun struct {
	engine   *batchagent.Engine
	name     string
	spec     *batchagent.Spec
	input    batchagent.Input
	media    []llm.Part     // the task's media after its text; nil: none
	observer agent.Observer // teed with the progress observer; may be nil
	recorder Recorder       // may be nil
}

// progressBuffer is the capacity of the progress channel: a few events
// in hand while the client reads.
const progressBuffer = 16

// chunks never calls admitted: the agent's first chunk, the progress
// event of its first turn, comes as it starts, before its first model
// call waits for admission.
func (a *agentRun) chunks(ctx context.Context, _ func()) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		// An observer that is an agent.Scope (a tracer) gets the agent's
		// begin and end: its span is the parent of the turns'.
		endScope := func(batchagent.Result) {}
		if sc, ok := a.observer.(agent.Scope); ok {
			ctx, endScope = sc.Agent(ctx, a.name, 0)
		}
		obs := &progress{ch: make(chan *Event, progressBuffer), done: ctx.Done(), next: a.observer}
		h := a.engine.SubmitMedia(agent.WithObserver(ctx, obs), a.spec, a.input, a.media)
		defer func() {
			// The handle is ours: stop the agent (cancel first, which also
			// releases a progress send) and wait for it.
			cancel()
			h.Cancel()
			<-h.Done()
			r, _ := h.Try()
			endScope(r)
		}()
		for {
			select {
			case ev := <-obs.ch:
				if !yield(chunk{kind: chunkReasoning, event: ev}, nil) {
					return
				}
				continue
			case <-h.Done():
			}
			break
		}
		// Events sent before the agent ended are still in the channel.
		for {
			select {
			case ev := <-obs.ch:
				if !yield(chunk{kind: chunkReasoning, event: ev}, nil) {
					return
				}
				continue
			default:
			}
			break
		}
		r, _ := h.Try()
		if a.recorder != nil {
			a.recorder.Result(a.name, r)
		}
		if r.Err != nil {
			yield(chunk{}, r.Err)
			return
		}
		answer := string(r.Output)
		var s string
		if json.Unmarshal(r.Output, &s) == nil {
			answer = s // no output schema: the answer's text
		}
		for _, c := range []chunk{
			{kind: chunkText, text: answer},
			{kind: chunkUsage, usage: r.Usage},
			{kind: chunkFinish, finish: llm.FinishStop},
		} {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// progress is the agent.Observer that turns an agent's steps into
// reasoning events, teed with next.
type progress struct {
	ch   chan *Event
	done <-chan struct{} // the run's context: sends give up when it ends
	next agent.Observer  // may be nil
}

// maxSummary caps a tool result's summary.
const maxSummary = 200

func (p *progress) send(e *Event) {
	select {
	case p.ch <- e:
	case <-p.done:
	}
}

func (p *progress) Turn(ctx context.Context, turn int) (context.Context, func(*llm.Response, error)) {
	end := func(*llm.Response, error) {}
	if p.next != nil {
		ctx, end = p.next.Turn(ctx, turn)
	}
	p.send(&Event{Type: "turn", Turn: turn})
	return ctx, end
}

func (p *progress) ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(*llm.Response, error)) {
	if p.next != nil {
		return p.next.ModelCall(ctx, turn, req)
	}
	return ctx, func(*llm.Response, error) {}
}

func (p *progress) Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(string, error)) {
	next := func(string, error) {}
	if p.next != nil {
		ctx, next = p.next.Tool(ctx, turn, call)
	}
	args := call.Arguments
	if !json.Valid(args) {
		args = nil
	}
	p.send(&Event{Type: "tool_call", Turn: turn, Tool: call.Name, Arguments: args})
	return ctx, func(result string, err error) {
		next(result, err)
		e := &Event{Type: "tool_result", Turn: turn, Tool: call.Name}
		if err != nil {
			e.Error = err.Error()
		} else {
			e.Summary = summary(result)
		}
		p.send(e)
	}
}

func (p *progress) Retry(ctx context.Context, turn int, feedback string) {
	if p.next != nil {
		p.next.Retry(ctx, turn, feedback)
	}
	p.send(&Event{Type: "retry", Turn: turn, Feedback: feedback})
}

// summary is the start of s, cut at a rune boundary within maxSummary bytes.
func summary(s string) string {
	if len(s) <= maxSummary {
		return s
	}
	cut := maxSummary
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
