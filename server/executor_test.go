package server

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// script is a mode that yields fixed chunks.
type script []chunk

func (s script) chunks(context.Context, func()) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		for _, c := range s {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// tracer is a Tracer that keeps the span's input and output.
type tracer struct{ input, output string }

func (tr *tracer) Request(ctx context.Context, model, input string) (context.Context, func(string, llm.Usage, error)) {
	tr.input = input
	return ctx, func(output string, _ llm.Usage, _ error) { tr.output = output }
}

// TestExecutor checks the executor's contract: single use, content
// buffered from the text chunks only (reasoning is not content), the
// span's input and output set, [DONE] last, usage after the finish.
func TestExecutor(t *testing.T) {
	rec := httptest.NewRecorder()
	tr := &tracer{}
	_, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	x := &executor{w: rec, gone: make(chan struct{}), cancel: cancel, id: "chatcmpl-1", model: "m", stream: true,
		includeUsage: true, input: "question", tracer: tr}
	m := script{
		{kind: chunkReasoning, event: &Event{Type: "turn"}},
		{kind: chunkText, text: "Hel"},
		{kind: chunkText, text: "lo"},
		{kind: chunkUsage, usage: llm.Usage{PromptTokens: 3, CompletionTokens: 2}},
		{kind: chunkFinish, finish: llm.FinishStop},
	}
	if err := x.execute(t.Context(), m); err != nil {
		t.Fatalf("execute = %v", err)
	}
	if err := x.execute(t.Context(), m); !errors.Is(err, errUsed) {
		t.Errorf("second execute = %v, want errUsed", err)
	}
	if tr.input != "question" || tr.output != "Hello" {
		t.Errorf("span input %q output %q, want question and Hello", tr.input, tr.output)
	}
	var events []string
	for e := range strings.SplitSeq(strings.TrimSpace(rec.Body.String()), "\n\n") {
		events = append(events, e)
	}
	if len(events) != 7 {
		t.Fatalf("%d SSE events, want role, reasoning, 2 text, finish, usage, [DONE]:\n%s", len(events), rec.Body)
	}
	for i, want := range []string{`"role":"assistant","content":""`, `"reasoning_content":"turn 0\n"`, `"content":"Hel"`, `"content":"lo"`,
		`"finish_reason":"stop"`, `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5`, "data: [DONE]"} {
		if !strings.Contains(events[i], want) {
			t.Errorf("event %d = %s, want it to contain %s", i, events[i], want)
		}
	}
}

// TestExecutorDisconnect: a chunk that arrives after the client left
// cancels the request's context and writes nothing more.
func TestExecutorDisconnect(t *testing.T) {
	rec := httptest.NewRecorder()
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	gone := make(chan struct{})
	close(gone)
	x := &executor{w: rec, gone: gone, cancel: cancel, stream: true}
	if err := x.execute(ctx, script{{kind: chunkText, text: "x"}}); !errors.Is(err, errClientGone) {
		t.Fatalf("execute = %v, want errClientGone", err)
	}
	if !errors.Is(context.Cause(ctx), errClientGone) || rec.Body.Len() != 0 {
		t.Errorf("cause %v, body %q: want the context cancelled by errClientGone and nothing written", context.Cause(ctx), rec.Body)
	}
}

// TestExecutorStoppedByDrain: a request a drain stopped while it waited
// is answered 503 with Retry-After, even when its first chunk comes before
// the drain's cancellation does; one admitted first stays in flight.
func TestExecutorStoppedByDrain(t *testing.T) {
	rec := httptest.NewRecorder()
	_, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	x := &executor{w: rec, gone: make(chan struct{}), cancel: cancel, stream: true}
	if !x.stopWaiting() {
		t.Fatal("stopWaiting of a waiting request = false, want true")
	}
	if err := x.execute(t.Context(), script{{kind: chunkText, text: "x"}}); !errors.Is(err, errDraining) {
		t.Fatalf("execute = %v, want errDraining", err)
	}
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "data:") {
		t.Errorf("answer %d, Retry-After %q, body %q: want 503 with Retry-After, no stream", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}

	x = &executor{w: httptest.NewRecorder(), gone: make(chan struct{}), cancel: cancel}
	if !x.begin() || x.stopWaiting() {
		t.Error("a request admitted before the drain: stopWaiting = true, want it left in flight")
	}
}
