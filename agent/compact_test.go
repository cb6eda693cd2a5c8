package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/agent"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
	"github.com/google/go-cmp/cmp"
)

// pairing returns an error unless every assistant tool call in msgs is
// followed, before the next assistant or user message, by exactly one tool
// message with its ID, in call order, and every tool message answers such
// a call: what OpenAI, Anthropic and Bedrock require.
func pairing(msgs []llm.Message) error {
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		if m.Role == llm.RoleTool {
			return fmt.Errorf("messages[%d]: tool result %q answers no call", i, m.ToolCallID)
		}
		for j, c := range m.ToolCalls {
			k := i + 1 + j
			if k >= len(msgs) || msgs[k].Role != llm.RoleTool || msgs[k].ToolCallID != c.ID {
				return fmt.Errorf("messages[%d].tool_calls[%d] (%s): no result right after it", i, j, c.ID)
			}
		}
		i += len(m.ToolCalls)
	}
	return nil
}

// wireRequest is the part of an OpenAI chat request the pairing check reads.
type wireRequest struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func (w *wireRequest) messages() []llm.Message {
	out := make([]llm.Message, len(w.Messages))
	for i, m := range w.Messages {
		out[i] = llm.Message{Role: llm.Role(m.Role), ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, llm.ToolCall{ID: c.ID})
		}
	}
	return out
}

// wireCheck wraps the simulator's handler: it checks the pairing of every
// chat request it receives and counts the answers by status.
type wireCheck struct {
	next http.Handler

	mu       sync.Mutex // protects the fields below
	requests int
	refused  []string // the body writes of 400 answers (one each here)
	unpaired []error
}

// statusWriter records a 400 answer's body in rec's refusals before it
// goes out.
type statusWriter struct {
	http.ResponseWriter
	rec     *wireCheck
	refused bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.refused = code == http.StatusBadRequest
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.refused {
		w.rec.mu.Lock()
		w.rec.refused = append(w.rec.refused, string(b))
		w.rec.mu.Unlock()
	}
	return w.ResponseWriter.Write(b)
}
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rec *wireCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var wr wireRequest
	jerr := json.Unmarshal(body, &wr)
	// Recorded before the answer goes out, so that the client never
	// sees an answer the count misses.
	rec.mu.Lock()
	rec.requests++
	if jerr != nil {
		rec.unpaired = append(rec.unpaired, fmt.Errorf("request %d: %v", rec.requests, jerr))
	} else if err := pairing(wr.messages()); err != nil {
		rec.unpaired = append(rec.unpaired, fmt.Errorf("request %d: %v", rec.requests, err))
	}
	rec.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, rec: rec}
	rec.next.ServeHTTP(sw, r)
}

// simServer starts the HTTP simulator with cfg behind a wireCheck and
// returns a model speaking to it through the openai backend.
func simServer(t *testing.T, cfg simhttp.Config) (llm.Model, *wireCheck) {
	t.Helper()
	cfg.PrefillPerToken, cfg.DecodeStep, cfg.DecodeStepPerSeq = time.Nanosecond, time.Microsecond, time.Nanosecond
	s, err := simhttp.New(cfg)
	if err != nil {
		t.Fatalf("simhttp.New = %v", err)
	}
	rec := &wireCheck{next: s}
	hs := httptest.NewServer(rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // Run's result
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simhttp Run = %v", err)
		}
	})
	m, err := backendopenai.New(backendopenai.Config{BaseURL: hs.URL + "/v1", Flavor: backendopenai.FlavorSim, HTTPClient: hs.Client()})
	if err != nil {
		t.Fatalf("openai.New = %v", err)
	}
	return m, rec
}

// bigTool returns a tool whose results are about 1 KB, distinct per call.
func bigTool(t *testing.T) *tool.Pool {
	t.Helper()
	var n atomic.Int64
	lookup := tool.Func(tool.Spec{Name: "lookup", Description: "Looks a thing up.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":12}},"required":["q"]}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			i := n.Add(1)
			var b strings.Builder
			for b.Len() < 1000 {
				fmt.Fprintf(&b, "result %d line %d: some text the tool found. ", i, b.Len())
			}
			return b.String(), nil
		})
	p, err := tool.NewPool([]tool.Tool{lookup}, tool.PoolConfig{})
	if err != nil {
		t.Fatalf("tool.NewPool = %v", err)
	}
	return p
}

func checkServed(t *testing.T, rec *wireCheck, wantRefused int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, err := range rec.unpaired {
		t.Errorf("unpaired tool call sent: %v", err)
	}
	if len(rec.refused) != wantRefused {
		t.Errorf("server refused %d requests for their length, want %d: %q", len(rec.refused), wantRefused, rec.refused)
	}
}

// TestCompactionThirtyToolTurns is the must-show: an agent with 30
// tool turns of ~1 KB results on a 4k-context simulated model, through the
// openai backend, succeeds; every request the server received paired each
// tool call with one result, and none exceeded the window.
func TestCompactionThirtyToolTurns(t *testing.T) {
	const window = 4096
	m, rec := simServer(t, simhttp.Config{ContextWindow: window, Model: sim.Config{ToolTurns: 30, Seed: 3}})
	r := newRunner(t, agent.Config{Model: m, Tools: bigTool(t), MaxTurns: 40, MaxTokens: 256, ContextWindow: window,
		System: "You research things with the lookup tool."})
	st := start("Find everything about compaction.")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatalf("Run = %v, want success", err)
	}
	if st.ToolCalls != 30 || st.Turns != 31 {
		t.Errorf("tool calls %d, turns %d; want 30 and 31", st.ToolCalls, st.Turns)
	}
	if st.Compactions == 0 {
		t.Errorf("Compactions = 0, want > 0: 30 KB of results cannot fit 4k tokens")
	}
	if err := pairing(st.Messages); err != nil {
		t.Errorf("final conversation: %v", err)
	}
	rec.mu.Lock()
	requests := rec.requests
	rec.mu.Unlock()
	if requests != 31 {
		t.Errorf("server received %d requests, want 31 (no refusals, no retries)", requests)
	}
	checkServed(t, rec, 0)
	t.Logf("compactions %d, prompt tokens %d over %d calls", st.Compactions, st.Usage.PromptTokens, st.ModelCalls)
}

// TestCompactionLearnsWindow checks that an agent with no window configured
// learns it from the server's refusal ("maximum context length is 4096
// tokens"), compacts and carries on: one refusal, then success.
func TestCompactionLearnsWindow(t *testing.T) {
	m, rec := simServer(t, simhttp.Config{ContextWindow: 4096, Model: sim.Config{ToolTurns: 30, Seed: 3}})
	r := newRunner(t, agent.Config{Model: m, Tools: bigTool(t), MaxTurns: 40, MaxTokens: 256})
	st := start("Find everything about compaction.")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatalf("Run = %v, want success after learning the window", err)
	}
	if st.Compactions == 0 || st.ToolCalls != 30 {
		t.Errorf("compactions %d, tool calls %d; want > 0 and 30", st.Compactions, st.ToolCalls)
	}
	checkServed(t, rec, 1)
	if st.ModelCalls != 32 {
		t.Errorf("ModelCalls = %d, want 32: 31 turns and one refused call", st.ModelCalls)
	}
}

// history returns a task and n turns of one ~2 KB tool result each.
func history(n int) []llm.Message {
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "task"}}
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "lookup", Arguments: json.RawMessage(`{}`)}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "lookup", Content: strings.Repeat("x", 2000)})
	}
	return msgs
}

// TestCompactionLearnsWindowWithoutNumbers checks a refusal that states no
// sizes (Bedrock's "Input is too long"): the window is taken as 90% of the
// prompt sent, the conversation is compacted and the call sent again.
func TestCompactionLearnsWindowWithoutNumbers(t *testing.T) {
	tooLong := &llm.APIError{Backend: "bedrock", StatusCode: 400, Message: "Input is too long for requested model.", Err: llm.ErrContextLength}
	m := &scripted{answers: []any{tooLong, text("done")}}
	r := newRunner(t, agent.Config{Model: m, MaxTokens: 100})
	st := &agent.State{Messages: history(4)}
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatalf("Run = %v, want success", err)
	}
	if len(m.reqs) != 2 || st.Compactions != 1 {
		t.Fatalf("%d calls, %d compactions; want 2 and 1", len(m.reqs), st.Compactions)
	}
	first, second := agent.Size(m.reqs[0].Messages), agent.Size(m.reqs[1].Messages)
	if second*10 > first*9 {
		t.Errorf("resent prompt ~%d tokens, first ~%d: want at most 90%%", second, first)
	}
	if err := pairing(m.reqs[1].Messages); err != nil {
		t.Errorf("resent request: %v", err)
	}
}

// TestCompactionRelearnBounded checks that a server refusing every length
// ends the agent after a bounded number of resends, with the class kept.
func TestCompactionRelearnBounded(t *testing.T) {
	tooLong := &llm.APIError{Backend: "x", StatusCode: 400, Message: "prompt too long", Err: llm.ErrContextLength}
	m := &scripted{answers: []any{tooLong, tooLong, tooLong, tooLong, tooLong, tooLong}}
	r := newRunner(t, agent.Config{Model: m})
	st := &agent.State{Messages: history(6)}
	err := r.Run(t.Context(), st)
	if !errors.Is(err, llm.ErrContextLength) {
		t.Fatalf("Run = %v, want llm.ErrContextLength", err)
	}
	if st.ModelCalls != 4 {
		t.Errorf("ModelCalls = %d, want 4: the call and 3 resends", st.ModelCalls)
	}
}

// TestCompactionTaskTooLarge checks that a task that alone exceeds the
// window fails at once with the sizes named, without calling the model.
func TestCompactionTaskTooLarge(t *testing.T) {
	m := &scripted{}
	r := newRunner(t, agent.Config{Model: m, ContextWindow: 1000, MaxTokens: 100})
	st := start(strings.Repeat("a very long task ", 500))
	err := r.Run(t.Context(), st)
	var ce *agent.ContextError
	if !errors.As(err, &ce) || !errors.Is(err, llm.ErrContextLength) {
		t.Fatalf("Run = %v, want a *agent.ContextError wrapping llm.ErrContextLength", err)
	}
	if ce.Window != 1000 || ce.Reserve != 100 || ce.Task < 2000 || ce.Prompt < ce.Task {
		t.Errorf("ContextError = %+v, want window 1000, reserve 100, task > 2000 tokens", ce)
	}
	for _, want := range []string{"context window of 1000 tokens", "task message ~", "plus 100 for the answer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(m.reqs) != 0 || st.ModelCalls != 0 {
		t.Errorf("%d model calls, want none", st.ModelCalls)
	}
}

// TestCompactionNotNeeded checks that a conversation far from the window
// is sent untouched.
func TestCompactionNotNeeded(t *testing.T) {
	m := &scripted{answers: []any{text("done")}}
	r := newRunner(t, agent.Config{Model: m, ContextWindow: 100000})
	st := &agent.State{Messages: history(3)}
	want := history(3)
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, m.reqs[0].Messages); diff != "" || st.Compactions != 0 {
		t.Errorf("request changed (compactions %d): %s", st.Compactions, diff)
	}
}

// TestCompactionLatestTurnTooLarge checks that a tool result of the latest
// turn too large for the window fails with the latest turn's size named,
// after the older turns were compacted, without a call.
func TestCompactionLatestTurnTooLarge(t *testing.T) {
	m := &scripted{}
	r := newRunner(t, agent.Config{Model: m, ContextWindow: 2000, MaxTokens: 100})
	msgs := history(3)
	msgs[len(msgs)-1].Content = strings.Repeat("y", 10000)
	st := &agent.State{Messages: msgs}
	err := r.Run(t.Context(), st)
	var ce *agent.ContextError
	if !errors.As(err, &ce) {
		t.Fatalf("Run = %v, want a *agent.ContextError", err)
	}
	if ce.Latest < 2500 || ce.Task > 10 || !strings.Contains(err.Error(), fmt.Sprintf("latest turn ~%d", ce.Latest)) {
		t.Errorf("ContextError = %+v (%v), want the latest turn's ~2,500 tokens named", ce, err)
	}
	if st.Compactions != 1 || len(m.reqs) != 0 {
		t.Errorf("compactions %d, calls %d; want the older turns compacted once and no call", st.Compactions, len(m.reqs))
	}
	if err := pairing(st.Messages); err != nil {
		t.Error(err)
	}
}
