package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const outSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// scripted is a hand-written llm.Model fake that answers from a list and
// records the requests it saw.
type scripted struct {
	mu      sync.Mutex
	answers []any // *llm.Response or error, in order
	reqs    []*llm.Request
}

func (s *scripted) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if len(s.answers) == 0 {
		return nil, errors.New("scripted: no more answers")
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	if err, ok := a.(error); ok {
		return nil, err
	}
	return a.(*llm.Response), nil
}

func text(s string) *llm.Response {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: s}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2}}
}

func calls(cs ...llm.ToolCall) *llm.Response {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: cs}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5}}
}

// slotLog is a fake Slots that records the order of acquire, release and
// tool events.
type slotLog struct {
	mu     sync.Mutex
	events []string
	held   int
	prios  []int
}

func (l *slotLog) Acquire(ctx context.Context, priority int, req *llm.Request) (agent.Permit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "acquire")
	l.prios = append(l.prios, priority)
	l.held++
	return l, nil
}

func (l *slotLog) Release(resp *llm.Response, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.events = append(l.events, "release(err)")
	} else {
		l.events = append(l.events, "release")
	}
	l.held--
}

func (l *slotLog) note(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func mustSchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Compile(json.RawMessage(outSchema))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newPool(t *testing.T, slots *slotLog) *tool.Pool {
	t.Helper()
	echo := tool.Func(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			if slots != nil {
				slots.mu.Lock()
				held := slots.held
				slots.mu.Unlock()
				slots.note("tool(held=" + string(rune('0'+held)) + ")")
			}
			if strings.Contains(string(args), "fail") {
				return "", errors.New("echo refused")
			}
			if strings.Contains(string(args), "fatal") {
				return "", tool.ErrFatal
			}
			return "echo " + string(args), nil
		})
	p, err := tool.NewPool([]tool.Tool{echo}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newRunner(t *testing.T, cfg agent.Config) *agent.Runner {
	t.Helper()
	r, err := agent.New(cfg)
	if err != nil {
		t.Fatalf("agent.New = %v", err)
	}
	return r
}

func start(task string) *agent.State {
	return &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: task}}}
}

// TestSlotHeldOnlyDuringModelCalls checks the central rule of the agent
// loop: tools run with no slot held, and the second turn asks with a
// higher priority.
func TestSlotHeldOnlyDuringModelCalls(t *testing.T) {
	slots := &slotLog{}
	m := &scripted{answers: []any{
		calls(llm.ToolCall{ID: "a", Name: "echo", Arguments: json.RawMessage(`{"x":1}`)},
			llm.ToolCall{ID: "b", Name: "echo", Arguments: json.RawMessage(`{"x":2}`)}),
		text(`{"n": 3}`),
	}}
	r := newRunner(t, agent.Config{Model: m, Tools: newPool(t, slots), Schema: mustSchema(t), Gate: slots})
	st := start("go")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	want := []string{"acquire", "release", "tool(held=0)", "tool(held=0)", "acquire", "release"}
	if diff := cmp.Diff(want, slots.events); diff != "" {
		t.Errorf("slot and tool events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 1}, slots.prios); diff != "" {
		t.Errorf("priorities (-want +got):\n%s", diff)
	}
	if string(st.Output) != `{"n":3}` || st.Turns != 2 || st.ToolCalls != 2 || st.ModelCalls != 2 {
		t.Errorf("state = output %s turns %d tool calls %d model calls %d; want {\"n\":3}, 2, 2, 2", st.Output, st.Turns, st.ToolCalls, st.ModelCalls)
	}
	if st.Usage != (llm.Usage{PromptTokens: 20, CompletionTokens: 7}) {
		t.Errorf("usage = %+v, want the sum of both calls", st.Usage)
	}
}

// TestConversation checks the exact messages: shared prefix first, tool
// results in call order with synthesised IDs, tool errors as error results,
// and validation feedback before the retry.
func TestConversation(t *testing.T) {
	m := &scripted{answers: []any{
		calls(llm.ToolCall{Name: "echo", Arguments: json.RawMessage(`{"x":"fail"}`)},
			llm.ToolCall{Name: "nope", Arguments: json.RawMessage(`{}`)}),
		text("Here you go: {\"n\": \"three\"}"),
		text("```json\n{\"n\": 3}\n```"),
	}}
	sch := mustSchema(t)
	r := newRunner(t, agent.Config{Model: m, System: "Be brief.", Tools: newPool(t, nil), Schema: sch})
	st := start("count")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if string(st.Output) != `{"n":3}` || st.Corrections != 1 {
		t.Fatalf("output %s corrections %d, want {\"n\":3} after 1 correction", st.Output, st.Corrections)
	}
	last := m.reqs[2]
	if got, want := last.Messages[0].Content, "Be brief.\n\n"+sch.Instructions(); got != want {
		t.Errorf("system message = %q, want system prompt then instructions %q", got, want)
	}
	if len(last.Tools) != 1 || last.Tools[0].Name != "echo" || last.Output == nil {
		t.Errorf("request tools %+v output %v; want echo and the output spec", last.Tools, last.Output)
	}
	var roles []string
	for _, msg := range last.Messages {
		roles = append(roles, string(msg.Role))
	}
	if diff := cmp.Diff([]string{"system", "user", "assistant", "tool", "tool", "assistant", "user"}, roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	t1, t2 := last.Messages[3], last.Messages[4]
	if t1.ToolCallID != "call_0_0" || !t1.IsError || !strings.Contains(t1.Content, "echo refused") {
		t.Errorf("first tool message = %+v, want error result for call_0_0", t1)
	}
	if t2.ToolCallID != "call_0_1" || !t2.IsError || !strings.Contains(t2.Content, "unknown tool") {
		t.Errorf("second tool message = %+v, want unknown-tool error for call_0_1", t2)
	}
	fb := last.Messages[6].Content
	if !strings.Contains(fb, "$.n") {
		t.Errorf("feedback %q does not name the problem's path $.n", fb)
	}
}

func TestFatalToolEndsAgent(t *testing.T) {
	m := &scripted{answers: []any{calls(llm.ToolCall{ID: "a", Name: "echo", Arguments: json.RawMessage(`{"x":"fatal"}`)})}}
	r := newRunner(t, agent.Config{Model: m, Tools: newPool(t, nil)})
	err := r.Run(t.Context(), start("x"))
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Op != "tool" || ae.Turn != 0 || !errors.Is(err, tool.ErrFatal) {
		t.Errorf("Run = %v, want *agent.Error op tool turn 0 wrapping tool.ErrFatal", err)
	}
}

func TestPermanentErrorNotRetried(t *testing.T) {
	bad := &llm.APIError{Backend: "x", StatusCode: 400, Err: llm.ErrBadRequest}
	m := &scripted{answers: []any{bad, text("unused")}}
	r := newRunner(t, agent.Config{Model: m})
	st := start("x")
	err := r.Run(t.Context(), st)
	if !errors.Is(err, llm.ErrBadRequest) || st.ModelCalls != 1 || st.Retries != 0 {
		t.Errorf("Run = %v after %d calls, %d retries; want the 400 after 1 call", err, st.ModelCalls, st.Retries)
	}
}

// TestBackoffHonoursRetryAfter checks that a transient failure is retried
// after the wait the backend asked for, with no slot held meanwhile.
func TestBackoffHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limited := &llm.APIError{Backend: "x", StatusCode: 429, RetryAfter: 2 * time.Second, Err: llm.ErrRateLimited}
		m := &scripted{answers: []any{limited, text("done")}}
		slots := &slotLog{}
		r := newRunner(t, agent.Config{Model: m, Gate: slots})
		st := start("x")
		begin := time.Now()
		if err := r.Run(t.Context(), st); err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		if took < 2*time.Second || took > 2200*time.Millisecond {
			t.Errorf("took %v, want Retry-After 2s plus at most 10%% jitter", took)
		}
		if st.Retries != 1 || st.Timings.Backoff != took || string(st.Output) != `"done"` {
			t.Errorf("retries %d backoff %v output %s; want 1, %v, \"done\"", st.Retries, st.Timings.Backoff, st.Output, took)
		}
		if diff := cmp.Diff([]string{"acquire", "release(err)", "acquire", "release"}, slots.events); diff != "" {
			t.Errorf("slot events (-want +got):\n%s", diff)
		}
	})
}

// TestResumeFromState continues an agent from a checkpointed state: it
// does not redo the turns already in the conversation.
func TestResumeFromState(t *testing.T) {
	m, err := sim.New(sim.Config{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var turns []int
	r := newRunner(t, agent.Config{
		Model: m, Tools: newPool(t, nil), Schema: mustSchema(t),
		OnTurn: func(ctx context.Context, st *agent.State) { turns = append(turns, st.Turns) },
	})
	full := start("item 1")
	if err := r.Run(t.Context(), full); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2}, turns); diff != "" {
		t.Fatalf("OnTurn turns (-want +got):\n%s", diff)
	}
	// Resume after turn 1: the state as checkpointed then.
	resumed := &agent.State{Messages: full.Messages[:3], Turns: 1}
	if err := r.Run(t.Context(), resumed); err != nil {
		t.Fatal(err)
	}
	if string(resumed.Output) != string(full.Output) || resumed.ModelCalls != 1 {
		t.Errorf("resumed output %s after %d calls, want %s after 1", resumed.Output, resumed.ModelCalls, full.Output)
	}
}

func TestMaxTurns(t *testing.T) {
	c := calls(llm.ToolCall{ID: "a", Name: "echo", Arguments: json.RawMessage(`{}`)})
	m := &scripted{answers: []any{c, c, c}}
	r := newRunner(t, agent.Config{Model: m, Tools: newPool(t, nil), MaxTurns: 2})
	st := start("x")
	err := r.Run(t.Context(), st)
	if !errors.Is(err, agent.ErrMaxTurns) || st.Turns != 2 {
		t.Errorf("Run = %v after %d turns, want ErrMaxTurns after 2", err, st.Turns)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := agent.New(agent.Config{}); err == nil {
		t.Error("New without a model = nil error, want error")
	}
	if _, err := agent.New(agent.Config{Model: &scripted{}, MaxTurns: -1}); err == nil {
		t.Error("New with negative max turns = nil error, want error")
	}
	if err := newRunner(t, agent.Config{Model: &scripted{}}).Run(t.Context(), &agent.State{}); err == nil {
		t.Error("Run on an empty conversation = nil error, want error")
	}
}

// TestRepairBeforeRetry checks that a broken but unambiguous answer is
// repaired instead of sent back, and that the repair is counted.
func TestRepairBeforeRetry(t *testing.T) {
	m := &scripted{answers: []any{text("```json\n{\"n\": 3,}\n```")}}
	r := newRunner(t, agent.Config{Model: m, Schema: mustSchema(t)})
	st := start("x")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if string(st.Output) != `{"n":3}` || st.Repairs != 2 || st.ModelCalls != 1 || st.Corrections != 0 {
		t.Errorf("output %s repairs %d calls %d corrections %d; want {\"n\":3} after 2 repairs (fence, trailing comma), no retry", st.Output, st.Repairs, st.ModelCalls, st.Corrections)
	}
}
