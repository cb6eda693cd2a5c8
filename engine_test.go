package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const outSchema = `{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`

func newSim(t *testing.T, cfg sim.Config) *sim.Model {
	t.Helper()
	m, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New(%+v) = %v", cfg, err)
	}
	return m
}

// mustSpec compiles d, failing the test if d is invalid.
func mustSpec(t testing.TB, d batchagent.Def) *batchagent.Spec {
	t.Helper()
	spec, err := batchagent.NewSpec(d)
	if err != nil {
		t.Fatalf("NewSpec = %v", err)
	}
	return spec
}

// newEngine returns an engine with cfg, failing the test if cfg is invalid.
func newEngine(t testing.TB, cfg batchagent.Config) *batchagent.Engine {
	t.Helper()
	e, err := batchagent.New(cfg)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return e
}

// runWith runs d over in on a new engine with cfg, and returns the engine
// (for its Stats) and the results in input order.
func runWith(t testing.TB, cfg batchagent.Config, d batchagent.Def, in batchagent.Inputs) (*batchagent.Engine, []batchagent.Result) {
	t.Helper()
	e := newEngine(t, cfg)
	res, err := e.Run(t.Context(), mustSpec(t, d), in)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	return e, res
}

func inputs(n int) []batchagent.Input {
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"id": fmt.Sprint(i)}
	}
	return in
}

// countingTool returns a tool that sleeps d and counts executions and the
// peak number running at once.
func countingTool(name string, d time.Duration, cacheable bool) (tool.Tool, *atomic.Int64, *atomic.Int64) {
	var execs, cur, peak atomic.Int64
	t := tool.Func(tool.Spec{
		Name:        name,
		Description: "test tool",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Cacheable:   cacheable,
	}, func(ctx context.Context, args json.RawMessage) (string, error) {
		execs.Add(1)
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		defer cur.Add(-1)
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return "contents of " + string(args), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	return t, &execs, &peak
}

func TestRunAllSucceed(t *testing.T) {
	doc, execs, _ := countingTool("read_file", 20*time.Millisecond, true)
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model:        newSim(t, sim.Config{Seed: 1}),
		System:       "You answer questions about a document.",
		Task:         "Read the document path: shared.txt and answer for item {id}.",
		Tools:        []tool.Tool{doc},
		OutputSchema: json.RawMessage(outSchema),
	}), batchagent.Slice(inputs(50)))
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(res) != 50 {
		t.Fatalf("len(results) = %d, want 50", len(res))
	}
	type out struct {
		Value     int    `json:"value"`
		FirstWord string `json:"first_word"`
	}
	for i, r := range res {
		if r.Index != i || r.Err != nil || r.Input["id"] != fmt.Sprint(i) {
			t.Fatalf("result %d = {Index:%d Err:%v Input:%v}, want index %d, no error", i, r.Index, r.Err, r.Input, i)
		}
		if r.Turns != 2 || r.ModelCalls != 2 || r.ToolCalls != 1 {
			t.Errorf("result %d: turns %d attempts %d tool calls %d, want 2, 2, 1", i, r.Turns, r.ModelCalls, r.ToolCalls)
		}
		v, err := batchagent.Decode[out](r)
		if err != nil || v.FirstWord == "" {
			t.Errorf("Decode(result %d) = %+v, %v; want a first word", i, v, err)
		}
		if r.Usage.PromptTokens <= 0 || r.Usage.CompletionTokens <= 0 {
			t.Errorf("result %d usage = %+v, want positive counts", i, r.Usage)
		}
	}
	// Every agent read the same document: one execution.
	if got := execs.Load(); got != 1 {
		t.Errorf("tool executions = %d, want 1 (coalesced and cached)", got)
	}
}

// TestRunDeterministic checks that the same seed gives the same outputs.
func TestRunDeterministic(t *testing.T) {
	run := func() []string {
		res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model:        newSim(t, sim.Config{Seed: 7}),
			Task:         "item {id}",
			OutputSchema: json.RawMessage(outSchema),
		}), batchagent.Slice(inputs(20)))
		if err != nil {
			t.Fatal(err)
		}
		var outs []string
		for _, r := range res {
			outs = append(outs, string(r.Output))
		}
		return outs
	}
	a, b := run(), run()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("outputs differ between runs with one seed (-first +second):\n%s", diff)
	}
	if a[0] == a[1] && a[1] == a[2] {
		t.Errorf("outputs for different inputs are all %s, want them to vary", a[0])
	}
}

func TestBadJob(t *testing.T) {
	m := newSim(t, sim.Config{})
	tests := []struct {
		name string
		def  batchagent.Def
		want string
	}{
		{"no model", batchagent.Def{Task: "x"}, "no model"},
		{"no task", batchagent.Def{Model: m}, "empty task"},
		{"bad template", batchagent.Def{Model: m, Task: "hello {name"}, "task"},
		{"bad schema", batchagent.Def{Model: m, Task: "x", OutputSchema: json.RawMessage(`{"type":5}`)}, "output schema"},
		{"negative", batchagent.Def{Model: m, Task: "x", MaxTurns: -1}, "negative"},
		{"no retries and retries", batchagent.Def{Model: m, Task: "x", NoRetries: true, MaxRetries: 3}, "max retries 3"},
		{"no outage budget and a budget", batchagent.Def{Model: m, Task: "x", NoOutageBudget: true, OutageBudget: time.Second}, "outage budget 1s"},
		{"unknown priority", batchagent.Def{Model: m, Task: "x", Priority: 7}, "priority"},
		{"token limit below max tokens", batchagent.Def{Model: m, Task: "x", MaxTokens: 512, MaxTokensLimit: 256}, "max tokens limit 256"},
		{"token limit below the default", batchagent.Def{Model: m, Task: "x", MaxTokensLimit: 1000}, "max tokens limit 1000"},
		{"duplicate tools", batchagent.Def{Model: m, Task: "x", Tools: []tool.Tool{
			echoNamed("a"), echoNamed("a")}}, "tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := batchagent.NewSpec(tt.def)
			if spec != nil || !errors.Is(err, batchagent.ErrBadJob) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewSpec() = %v, %v; want no spec and ErrBadJob mentioning %q", spec, err, tt.want)
			}
		})
	}
	// Without a spec there is nothing to run.
	if _, err := batchagent.Run(t.Context(), nil, batchagent.Slice(inputs(1))); !errors.Is(err, batchagent.ErrBadJob) {
		t.Errorf("Run(nil spec) = %v, want ErrBadJob", err)
	}
	if _, err := batchagent.Stream(t.Context(), nil, batchagent.Slice(inputs(1))); !errors.Is(err, batchagent.ErrBadJob) {
		t.Errorf("Stream(nil spec) = %v, want ErrBadJob", err)
	}
}

// TestBadConfig checks the engine settings New refuses: each error wraps
// ErrBadConfig and says what is wrong.
func TestBadConfig(t *testing.T) {
	m := newSim(t, sim.Config{})
	tests := []struct {
		name string
		cfg  batchagent.Config
		want string
	}{
		{"negative max active", batchagent.Config{MaxActive: -1}, "negative max active -1"},
		{"negative max inflight", batchagent.Config{Admission: batchagent.Admission{MaxInflight: -1}}, "negative max inflight -1"},
		{"negative rate", batchagent.Config{Admission: batchagent.Admission{RateLimit: batchagent.RateLimit{RPM: -1}}}, "negative rate limit"},
		{"no start window and a window", batchagent.Config{Admission: batchagent.Admission{NoStartWindow: true, StartWindow: time.Second}}, "start window 1s"},
		{"retry failed without checkpoint", batchagent.Config{RetryFailed: true}, "retry failed needs a checkpoint"},
		{"stop on checkpoint error without checkpoint", batchagent.Config{StopOnCheckpointError: true}, "needs a checkpoint"},
		{"backend without model", batchagent.Config{Backends: map[batchagent.Backend]batchagent.Admission{{Name: "m"}: {}}}, `backend "m": no model`},
		{"bad backend admission", batchagent.Config{Backends: map[batchagent.Backend]batchagent.Admission{{Model: m, Name: "m"}: {MaxInflight: -2}}},
			`backend "m": admission: negative max inflight -2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := batchagent.New(tt.cfg)
			if e != nil || !errors.Is(err, batchagent.ErrBadConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() = %v, %v; want no engine and ErrBadConfig mentioning %q", e, err, tt.want)
			}
		})
	}
}

// TestFailureKinds checks that each kind of failure is reported on its own
// input, with the others unaffected.
func TestFailureKinds(t *testing.T) {
	tests := []struct {
		name     string
		cfg      sim.Config
		def      func(*batchagent.Def)
		inputs   batchagent.Inputs
		wantKind batchagent.Kind
		wantOp   string
		wantMsg  string
		attempts int
	}{
		{
			name:     "template",
			def:      func(d *batchagent.Def) { d.Task = "look at {missing}" },
			inputs:   batchagent.Slice(inputs(1)),
			wantKind: batchagent.KindTemplate, wantOp: "render", wantMsg: `"missing"`,
		},
		{
			name:     "input",
			inputs:   batchagent.JSONL(strings.NewReader("{\"id\":\"a\"}\n{oops\n"), "in.jsonl"),
			wantKind: batchagent.KindInput, wantOp: "input", wantMsg: "in.jsonl:2",
		},
		{
			name:     "validation",
			cfg:      sim.Config{InvalidRate: 1},
			inputs:   batchagent.Slice(inputs(1)),
			wantKind: batchagent.KindValidation, wantOp: "validate", wantMsg: "first_word",
			attempts: 3,
		},
		{
			name:     "backend",
			cfg:      sim.Config{FailRate: 1},
			def:      func(d *batchagent.Def) { d.NoOutageBudget = true }, // a 503 is an outage: retried by count only without a budget
			inputs:   batchagent.Slice(inputs(1)),
			wantKind: batchagent.KindBackend, wantOp: "generate", wantMsg: "HTTP 503",
			attempts: 3,
		},
		{
			name:     "max turns",
			cfg:      sim.Config{ToolTurns: 5},
			def:      func(d *batchagent.Def) { d.MaxTurns = 2; d.Tools = []tool.Tool{echoTool()} },
			inputs:   batchagent.Slice(inputs(1)),
			wantKind: batchagent.KindMaxTurns, wantOp: "generate", wantMsg: "max turns",
			attempts: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := batchagent.Def{
				Model:        newSim(t, tt.cfg),
				Task:         "item {id}",
				OutputSchema: json.RawMessage(outSchema),
				Backoff:      batchagent.Backoff{Base: time.Millisecond},
			}
			if tt.def != nil {
				tt.def(&d)
			}
			res, err := batchagent.Run(t.Context(), mustSpec(t, d), tt.inputs)
			if err != nil {
				t.Fatal(err)
			}
			r := res[len(res)-1]
			ae, ok := r.Err.(*batchagent.AgentError)
			if !ok {
				t.Fatalf("last result err = %v (%T), want *AgentError", r.Err, r.Err)
			}
			if ae.Kind != tt.wantKind || ae.Op != tt.wantOp || !strings.Contains(ae.Error(), tt.wantMsg) {
				t.Errorf("err = kind %q op %q %q, want kind %q op %q mentioning %q", ae.Kind, ae.Op, ae.Error(), tt.wantKind, tt.wantOp, tt.wantMsg)
			}
			if r.ModelCalls != tt.attempts {
				t.Errorf("attempts = %d, want %d", r.ModelCalls, tt.attempts)
			}
			if r.Output != nil {
				t.Errorf("failed result has output %s", r.Output)
			}
			for _, other := range res[:len(res)-1] {
				if other.Err != nil {
					t.Errorf("result %d failed too: %v", other.Index, other.Err)
				}
			}
		})
	}
}

func TestValidationErrorCarriesProblemsAndRaw(t *testing.T) {
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model:        newSim(t, sim.Config{InvalidRate: 1}),
		Task:         "x",
		OutputSchema: json.RawMessage(outSchema),
		NoRetries:    true,
	}), batchagent.Slice(inputs(1)))
	if err != nil {
		t.Fatal(err)
	}
	ae := res[0].Err.(*batchagent.AgentError)
	if len(ae.Problems()) == 0 || res[0].Raw == "" {
		t.Errorf("validation error problems = %v, raw = %q; want both set", ae.Problems(), res[0].Raw)
	}
	if res[0].ModelCalls != 1 {
		t.Errorf("attempts with retries disabled = %d, want 1", res[0].ModelCalls)
	}
}

func echoNamed(name string) tool.Tool {
	return tool.Func(tool.Spec{Name: name}, func(ctx context.Context, args json.RawMessage) (string, error) { return string(args), nil })
}

func echoTool() tool.Tool {
	return tool.Func(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) { return string(args), nil })
}

// TestRetriesTransientFailures checks that transient failures are retried
// until every agent succeeds.
func TestRetriesTransientFailures(t *testing.T) {
	m := newSim(t, sim.Config{FailRate: 0.3, Seed: 3})
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: m, Task: "item {id}", OutputSchema: json.RawMessage(outSchema),
		MaxRetries: 20, Backoff: batchagent.Backoff{Base: time.Millisecond},
	}), batchagent.Slice(inputs(100)))
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
		attempts += r.ModelCalls
	}
	st := m.Stats()
	if st.Failures == 0 || int64(attempts) != st.Calls || attempts != 100+int(st.Failures) {
		t.Errorf("attempts %d, sim calls %d, failures %d; want attempts = calls = 100 + failures > 100", attempts, st.Calls, st.Failures)
	}
}

func TestAgentTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model:   newSim(t, sim.Config{Latency: time.Second}),
			Task:    "x",
			Timeout: 300 * time.Millisecond,
		}), batchagent.Slice(inputs(3)))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3 {
			t.Fatalf("Run returned %d results, want 3", len(res))
		}
		for i, r := range res {
			if r.Index != i || r.Output != nil {
				t.Errorf("result %d: index %d output %s, want index %d and no output", i, r.Index, r.Output, i)
			}
			if k := batchagent.KindOf(r.Err); k != batchagent.KindTimeout {
				t.Errorf("result %d kind = %q (%v), want timeout", r.Index, k, r.Err)
			}
			if r.Timings.Total != 300*time.Millisecond {
				t.Errorf("result %d total = %v, want 300ms", r.Index, r.Timings.Total)
			}
		}
	})
}

// TestCancelKeepsFinished cancels a run in the middle: finished agents keep
// their results and every other input reports canceled.
func TestCancelKeepsFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var (
			mu   sync.Mutex
			seen int
		)
		e := newEngine(t, batchagent.Config{
			Admission: batchagent.Admission{MaxInflight: 2},
			OnResult: func(r batchagent.Result) {
				mu.Lock()
				defer mu.Unlock()
				seen++
				if seen == 4 {
					cancel()
				}
			},
		})
		spec := mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond}),
			Task:  "x {id}",
		})
		res, err := e.Run(ctx, spec, batchagent.Slice(inputs(10)))
		if err != nil {
			t.Fatal(err)
		}
		var ok, canceled int
		for i, r := range res {
			if r.Index != i {
				t.Fatalf("results[%d].Index = %d", i, r.Index)
			}
			switch batchagent.KindOf(r.Err) {
			case "":
				ok++
			case batchagent.KindCanceled:
				canceled++
			default:
				t.Errorf("result %d: unexpected %v", i, r.Err)
			}
		}
		if ok != 4 || canceled != 6 {
			t.Errorf("ok %d canceled %d, want 4 and 6", ok, canceled)
		}
		if seen != 10 {
			t.Errorf("OnResult called %d times, want 10", seen)
		}
	})
}

// TestSlotReleasedDuringTools checks the central claim: with one inference
// slot and slow tools, tool waits overlap instead of serialising.
func TestSlotReleasedDuringTools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, execs, peak := countingTool("read_file", time.Second, false)
		start := time.Now()
		_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1}}, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Millisecond}),
			Task:  "read path: {id}.txt",
			Tools: []tool.Tool{slow},
		}, batchagent.Slice(inputs(5)))
		wall := time.Since(start)
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		// First calls back to back: agent 4's ends at 50ms; its tool ends at
		// 1.05s and its second call at 1.06s. Holding the slot through tools
		// would take 5 × 1.02s.
		if want := 1060 * time.Millisecond; wall != want {
			t.Errorf("wall = %v, want %v (slot released during tool waits)", wall, want)
		}
		if execs.Load() != 5 || peak.Load() != 5 {
			t.Errorf("tool executions %d peak concurrency %d, want 5 and 5", execs.Load(), peak.Load())
		}
	})
}

// TestPriorityDrainsNearDone checks that agents with more turns done get
// the slot first: with one slot, the agents that already called their
// tool finish before fresh agents start.
func TestPriorityDrainsNearDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast, _, _ := countingTool("read_file", 0, false)
		var (
			mu    sync.Mutex
			order []int
		)
		runWith(t, batchagent.Config{
			Admission: batchagent.Admission{MaxInflight: 1},
			MaxActive: 4,
			OnResult: func(r batchagent.Result) {
				mu.Lock()
				order = append(order, r.Index)
				mu.Unlock()
			},
		}, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Millisecond}),
			Task:  "read path: {id}.txt",
			Tools: []tool.Tool{fast},
		}, batchagent.Slice(inputs(8)))
		// Without priority, all 8 first turns (FIFO) would precede any
		// second turn. With it, the first finishes before agent 5 starts.
		if len(order) != 8 || slices.Index(order, 0) > 3 {
			t.Errorf("completion order = %v, want agent 0 among the first four", order)
		}
	})
}

func TestMaxActiveBoundsAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, _, peak := countingTool("read_file", 50*time.Millisecond, false)
		_, res := runWith(t, batchagent.Config{MaxActive: 3}, batchagent.Def{
			Model: newSim(t, sim.Config{}),
			Task:  "read path: {id}.txt",
			Tools: []tool.Tool{slow},
		}, batchagent.Slice(inputs(30)))
		if len(res) != 30 || peak.Load() != 3 {
			t.Errorf("results %d, peak concurrent agents in tools %d; want 30 and 3", len(res), peak.Load())
		}
	})
}

func TestStreamCompletionOrderAndBreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Agent 0 has the longest task, so it is not first to finish when
		// latency grows with output... the simulator's latency is fixed, so
		// use per-input tools: agent 0's tool is slow.
		slowFor0 := tool.Func(tool.Spec{Name: "wait", Parameters: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"string"}}}`)},
			func(ctx context.Context, args json.RawMessage) (string, error) {
				var a struct{ Ms string }
				_ = json.Unmarshal(args, &a)
				d, _ := time.ParseDuration(a.Ms + "ms")
				tm := time.NewTimer(d)
				defer tm.Stop()
				select {
				case <-tm.C:
					return "ok", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			})
		ins := []batchagent.Input{{"ms": "500"}, {"ms": "10"}, {"ms": "20"}}
		seq, err := batchagent.Stream(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{}), Task: "wait ms: {ms}", Tools: []tool.Tool{slowFor0},
		}), batchagent.Slice(ins))
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for r := range seq {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			got = append(got, r.Index)
		}
		if diff := cmp.Diff([]int{1, 2, 0}, got); diff != "" {
			t.Errorf("completion order (-want +got):\n%s", diff)
		}

		// Breaking early cancels the rest and returns promptly.
		seq, _ = batchagent.Stream(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{}), Task: "wait ms: {ms}", Tools: []tool.Tool{slowFor0},
		}), batchagent.Slice(ins))
		start := time.Now()
		for range seq {
			break
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("break took %v, want the slow agent cancelled at once", d)
		}
	})
}

func TestJSONLInputsStayLazy(t *testing.T) {
	var b strings.Builder
	for i := range 50000 {
		fmt.Fprintf(&b, "{\"id\":\"%d\"}\n", i)
	}
	e := newEngine(t, batchagent.Config{MaxActive: 16})
	in := &countingReader{r: strings.NewReader(b.String())}
	seq, err := e.Stream(t.Context(), mustSpec(t, batchagent.Def{Model: newSim(t, sim.Config{}), Task: "{id}"}), batchagent.JSONL(in, ""))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range seq {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if n == 0 && in.n.Load() > 256<<10 {
			// The reader's 64 KiB buffer, a few times over at most.
			t.Errorf("%d of %d bytes read by the first result; want the input read as it is needed", in.n.Load(), b.Len())
		}
		n++
	}
	st := e.Stats()
	if n != 50000 || st.Done != 50000 || st.OK != 50000 || st.ModelCalls != 50000 {
		t.Errorf("results %d, stats %+v; want 50000 done, ok and model calls", n, st)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func TestResultJSON(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte("{\"id\":\"a\"}\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: newSim(t, sim.Config{Seed: 1}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
	}), batchagent.JSONL(f, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, r := range res {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "timings")
		got = append(got, m)
	}
	if got[0]["output"] == nil || got[0]["error"] != nil || got[0]["input"].(map[string]any)["id"] != "a" {
		t.Errorf("ok result JSON = %v, want output and input, no error", got[0])
	}
	wantErr := map[string]any{"kind": "input", "op": "input", "turn": float64(-1)}
	e := got[1]["error"].(map[string]any)
	msg, _ := e["message"].(string)
	delete(e, "message")
	if diff := cmp.Diff(wantErr, e); diff != "" || !strings.HasPrefix(msg, "in.jsonl:2:") {
		t.Errorf("failed result error JSON (-want +got):\n%s\nmessage %q, want prefix in.jsonl:2:", diff, msg)
	}
}

var _ llm.Model = (*sim.Model)(nil)

// TestStreamCancelledYieldsNothing starts streams on a cancelled context:
// no input has started, so none yields a result (admission's select between
// a free token and ctx.Done used to pick the token half the time).
func TestStreamCancelledYieldsNothing(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	spec := mustSpec(t, batchagent.Def{Model: m, Task: "x {id}"})
	for range 50 {
		results, err := batchagent.Stream(ctx, spec, batchagent.Slice(inputs(5)))
		if err != nil {
			t.Fatal(err)
		}
		for r := range results {
			t.Fatalf("Stream on a cancelled context yielded result %d: %v", r.Index, r.Err)
		}
	}
	if m.Stats().Calls != 0 {
		t.Errorf("%d model calls, want 0", m.Stats().Calls)
	}
}

// runDroppingSpec streams 20 inputs of a job with a cacheable tool on a
// new engine, holding no reference to its Spec once the stream has begun
// and collecting garbage after the first result. It returns the engine
// and a weak pointer to the Spec.
func runDroppingSpec(t *testing.T) (*batchagent.Engine, weak.Pointer[batchagent.Spec]) {
	t.Helper()
	doc, execs, _ := countingTool("read_file", 0, true)
	e := newEngine(t, batchagent.Config{MaxActive: 4})
	spec := mustSpec(t, batchagent.Def{Model: newSim(t, sim.Config{Seed: 1, Latency: 5 * time.Millisecond}),
		Task: "read path: shared.txt for {id}", Tools: []tool.Tool{doc}})
	collected := weak.Make(spec)
	seq, err := e.Stream(t.Context(), spec, batchagent.Slice(inputs(20)))
	if err != nil {
		t.Fatal(err)
	}
	spec = nil
	n := 0
	for r := range seq {
		if n == 0 {
			runtime.GC() // the spec may be collected while agents are still to start
		}
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
		n++
	}
	if n != 20 || execs.Load() != 1 {
		t.Fatalf("%d results, %d tool executions; want 20 and 1", n, execs.Load())
	}
	return e, collected
}

// TestSpecDroppedDuringRun checks that a run does not depend on its caller
// holding the Spec: an engine once fetched the template through a weak
// pointer, and a collected Spec failed every later agent with "nil spec".
func TestSpecDroppedDuringRun(t *testing.T) {
	runDroppingSpec(t)
}

// TestStatsKeepWorkOfCollectedSpec checks that the engine's counters keep
// the tool work of a Spec once the Spec is collected: they count the
// engine's work, and must not go down.
func TestStatsKeepWorkOfCollectedSpec(t *testing.T) {

	e, collected := runDroppingSpec(t)
	// Give the collector and the engine's cleanup of the spec's runner a
	// chance to run; stop as soon as the counters change.
	for i := 0; i < 100 && (collected.Value() != nil || e.Stats().ToolExecuted == 1); i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if collected.Value() != nil {
		t.Skip("the spec was not collected: nothing to check")
	}
	if st := e.Stats(); st.ToolCalls != 20 || st.ToolExecuted != 1 || len(st.Tools) != 1 {
		t.Errorf("stats after the spec was collected: tool calls requested %d, executed %d, per tool %v; want 20, 1 and one tool's counters",
			st.ToolCalls, st.ToolExecuted, st.Tools)
	}
}
