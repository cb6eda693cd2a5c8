package server

import (
	"context"
	"encoding/json"
	"iter"
	"sync"

	"github.com/batchagent/batchagent/llm"
)

// fanout answers a request for n choices from a backend that answers one
// a call (Anthropic, Bedrock, the simulator): n passthrough calls of the
// same request, run concurrently, each through the backend's admission.
// Their chunks come tagged with their choice (0 to n-1) as they arrive;
// their usage is summed into one usage chunk at the end. The first call
// to fail fails the request, and the others are cancelled.
type fanout struct {
	calls *passthrough // the one call, made n times
	n     int
}

// fanned is one chunk of one of a fanout's calls, or its end.
type fanned struct {
	c   chunk
	err error
	end bool // the call is over (its last chunk, or error, sent before)
}

func (f *fanout) chunks(ctx context.Context, admitted func()) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan fanned)
		var wg sync.WaitGroup
		// The calls are ours: stop them and wait for them, whatever ends
		// the iteration.
		defer func() {
			cancel()
			wg.Wait()
		}()
		var once sync.Once
		admit := func() { once.Do(admitted) }
		send := func(m fanned) bool {
			select {
			case ch <- m:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for i := range f.n {
			wg.Go(func() {
				for c, err := range f.calls.chunks(ctx, admit) {
					c.choice = i
					if !send(fanned{c: c, err: err}) || err != nil {
						return
					}
				}
				send(fanned{end: true})
			})
		}
		var usage llm.Usage
		hasUsage := false
		for left := f.n; left > 0; {
			var m fanned
			select {
			case m = <-ch:
			case <-ctx.Done():
				return // the executor sees the context's end
			}
			switch {
			case m.end:
				left--
				continue
			case m.err != nil:
				yield(chunk{}, m.err)
				return
			case m.c.kind == chunkUsage:
				usage, hasUsage = usage.Add(m.c.usage), true
				continue
			}
			if !yield(m.c, nil) {
				return
			}
		}
		if hasUsage {
			yield(chunk{kind: chunkUsage, usage: usage}, nil)
		}
	}
}

// choiceChunks returns the chunks of raw, a choice other than the first
// of an OpenAI-compatible answer to n > 1 (a completion's choice, with
// its message, or a stream chunk's, with its delta), tagged with its
// index: its text, tool calls and finish, and its other members
// (logprobs) as a chunkExtra. ok is false for a choice that cannot be
// read, which is left out.
func choiceChunks(raw json.RawMessage) (out []chunk, ok bool) {
	var c struct {
		Index        int         `json:"index"`
		Message      *choiceBody `json:"message"`
		Delta        *choiceBody `json:"delta"`
		FinishReason *string     `json:"finish_reason"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Index < 1 || c.Index >= maxN {
		return nil, false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil, false
	}
	body, streamed := c.Delta, true
	if c.Message != nil {
		body, streamed = c.Message, false
	}
	if body != nil {
		text := body.Content
		if text == "" {
			text = body.Refusal
		}
		if text != "" {
			out = append(out, chunk{kind: chunkText, text: text, choice: c.Index})
		}
		for j, tc := range body.ToolCalls {
			i := j
			if streamed && tc.Index != nil {
				i = *tc.Index
			}
			out = append(out, chunk{kind: chunkToolCall, choice: c.Index, toolCall: llm.ToolCallDelta{
				Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
	var x *llm.Extra
	for k, v := range members {
		switch k {
		case "index", "message", "delta", "finish_reason":
			continue
		}
		if string(v) == "null" {
			continue
		}
		if x == nil {
			x = &llm.Extra{Choice: map[string]json.RawMessage{}}
		}
		x.Choice[k] = v
	}
	if x != nil {
		out = append(out, chunk{kind: chunkExtra, extra: x, choice: c.Index})
	}
	if c.FinishReason != nil && *c.FinishReason != "" {
		out = append(out, chunk{kind: chunkFinish, finish: llm.FinishReason(*c.FinishReason), choice: c.Index})
	}
	return out, true
}

// choiceBody is what the gateway reads of a choice's message or delta.
type choiceBody struct {
	Content   string `json:"content"`
	Refusal   string `json:"refusal"`
	ToolCalls []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}
