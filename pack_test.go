package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/tool"
)

// labelSchema is the output schema of the packing tests: a label that
// follows from the task's number, so that a result can be checked
// against its input.
const labelSchema = `{"type":"object","properties":{"label":{"type":"string","enum":["even","odd"]}},"required":["label"],"additionalProperties":false}`

// labelOf is the correct answer to the task "classify N".
func labelOf(task string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(task, "classify "))
	if n%2 == 0 {
		return `{"label":"even"}`
	}
	return `{"label":"odd"}`
}

// member is one member of a scripted packed answer, written as is.
type member struct{ id, value string }

// packWire is an OpenAI-compatible chat server for the packing tests. A
// packed request (its response_format schema named pack.SchemaName) is
// answered by script from its ids and tasks, streamed in pieces of 7
// bytes; any other request gets the correct label of its task.
type packWire struct {
	script func(ids, tasks []string) (members []member, finish string)
	delay  time.Duration // before answering a packed request
	fail   atomic.Bool   // answer every request 503

	mu     sync.Mutex
	packs  [][]string // the tasks of each packed request, in order
	single []string   // the tasks of the other requests
}

func (s *packWire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		ResponseFormat struct {
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.fail.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"message":"down","type":"server_error"}}`)
		return
	}
	user := req.Messages[len(req.Messages)-1].Content
	content, finish := "", "stop"
	if req.ResponseFormat.JSONSchema.Name == pack.SchemaName {
		ids, tasks, err := pack.ParseTasks(user)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.packs = append(s.packs, tasks)
		s.mu.Unlock()
		if s.delay > 0 {
			select {
			case <-time.After(s.delay):
			case <-r.Context().Done():
				return
			}
		}
		members, f := s.script(ids, tasks)
		var b strings.Builder
		b.WriteString("{")
		for i, m := range members {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %s", m.id, m.value)
		}
		if f != "length" {
			b.WriteString("}")
		}
		content, finish = b.String(), f
	} else {
		s.mu.Lock()
		s.single = append(s.single, user)
		s.mu.Unlock()
		content = labelOf(user)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		d, _ := json.Marshal(map[string]string{"content": delta})
		f := "null"
		if finish != "" {
			f = strconv.Quote(finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", d, f)
		w.(http.Flusher).Flush()
	}
	for len(content) > 0 {
		n := min(7, len(content))
		chunk(content[:n], "")
		content = content[n:]
	}
	chunk("", finish)
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// answerAll is the script of a model that answers every task correctly.
func answerAll(ids, tasks []string) ([]member, string) {
	m := make([]member, len(ids))
	for i := range ids {
		m[i] = member{ids[i], labelOf(tasks[i])}
	}
	return m, "stop"
}

// packRun runs n "classify N" agents packed by maxAgents against s, and
// returns the engine and the results.
func packRun(t *testing.T, s *packWire, n, maxAgents int, d batchagent.Def) (*batchagent.Engine, []batchagent.Result) {
	return packRunWith(t, batchagent.Config{}, s, n, maxAgents, d)
}

// packRunWith is packRun on an engine with cfg.
func packRunWith(t *testing.T, cfg batchagent.Config, s *packWire, n, maxAgents int, d batchagent.Def) (*batchagent.Engine, []batchagent.Result) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	d.Model, d.Task, d.OutputSchema = m, "classify {n}", json.RawMessage(labelSchema)
	d.Pack = batchagent.Pack{MaxAgents: maxAgents}
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"n": i}
	}
	return runWith(t, cfg, d, batchagent.Slice(in))
}

// checkLabels fails the test unless every result is its input's label.
func checkLabels(t *testing.T, res []batchagent.Result) {
	t.Helper()
	for i, r := range res {
		if want := labelOf(fmt.Sprintf("classify %d", i)); r.Err != nil || string(r.Output) != want {
			t.Errorf("result %d = %s, %v; want %s", i, r.Output, r.Err, want)
		}
	}
}

// TestPackBadEntryFallsBackAlone: whatever is wrong with one entry of a
// packed answer (missing, invalid, broken JSON, under an unknown id) only
// that agent runs alone; every other agent keeps its packed answer, and
// a duplicated id keeps its first value.
func TestPackBadEntryFallsBackAlone(t *testing.T) {
	const victim = "classify 5"
	for _, tc := range []struct {
		name  string
		edit  func(m []member, i int) []member // i: the victim's member
		alone bool                             // the victim runs alone
	}{
		{"missing", func(m []member, i int) []member { return slices.Delete(m, i, i+1) }, true},
		{"invalid", func(m []member, i int) []member { m[i].value = `{"label":"maybe"}`; return m }, true},
		{"broken JSON", func(m []member, i int) []member { m[i].value = `{"label":}`; return m }, true},
		{"not an object", func(m []member, i int) []member { m[i].value = `tru`; return m }, true},
		{"unknown id", func(m []member, i int) []member { m[i].id = "zz" + m[i].id; return m }, true},
		{"duplicate", func(m []member, i int) []member {
			return slices.Insert(m, i+1, member{m[i].id, `{"label":"even"}`}) // the victim is odd: a wrong second value
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &packWire{script: func(ids, tasks []string) ([]member, string) {
				m, f := answerAll(ids, tasks)
				if i := slices.Index(tasks, victim); i >= 0 {
					m = tc.edit(m, i)
				}
				return m, f
			}}
			e, res := packRun(t, s, 12, 6, batchagent.Def{})
			checkLabels(t, res)
			for i, r := range res {
				alone := tc.alone && i == 5
				if alone && (r.Packed != 0 || r.ModelCalls != 1) {
					t.Errorf("victim result: packed %d, %d model calls; want 0 and 1 (alone)", r.Packed, r.ModelCalls)
				}
				if !alone && (r.Packed < 1 || r.ModelCalls != 0) {
					t.Errorf("result %d: packed %d, %d model calls; want a packed answer and no call of its own", i, r.Packed, r.ModelCalls)
				}
			}
			wantAlone := 0
			if tc.alone {
				wantAlone = 1
			}
			st := e.Stats()
			if int(st.PackAlone) != wantAlone || int(st.Packed) != 12-wantAlone || len(s.single) != wantAlone {
				t.Errorf("stats: %d packed, %d alone, server saw %d single requests; want %d, %d, %d",
					st.Packed, st.PackAlone, len(s.single), 12-wantAlone, wantAlone, wantAlone)
			}
			if st.PackCalls != int64(len(s.packs)) || st.ModelCalls != st.PackCalls+int64(wantAlone) {
				t.Errorf("stats: %d pack calls, %d model calls; the server saw %d packed and %d single", st.PackCalls, st.ModelCalls, len(s.packs), len(s.single))
			}
		})
	}
}

// TestPackEmptyAnswerRunsEveryAgentAlone: an answer without any entry
// fails no agent: each runs alone.
func TestPackEmptyAnswerRunsEveryAgentAlone(t *testing.T) {
	s := &packWire{script: func(ids, tasks []string) ([]member, string) { return nil, "stop" }} // "{}"
	e, res := packRun(t, s, 6, 6, batchagent.Def{})
	checkLabels(t, res)
	if st := e.Stats(); st.PackAlone != 6 || st.Packed != 0 || len(s.single) != 6 {
		t.Errorf("stats: %d alone, %d packed, %d single requests; want 6, 0, 6", st.PackAlone, st.Packed, len(s.single))
	}
}

// TestPackShrinksOnTruncation: answers cut off at the token cap (finish
// reason length) halve the pack size; the agents they left out go into
// later packs, and every agent ends with its own correct answer.
func TestPackShrinksOnTruncation(t *testing.T) {
	s := &packWire{script: func(ids, tasks []string) ([]member, string) {
		m, _ := answerAll(ids, tasks)
		if len(m) > 2 {
			return m[:2], "length" // room for two answers only
		}
		return m, "stop"
	}}
	// One call at a time: each pack is formed after the answer before it.
	cfg := batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}}
	e, res := packRunWith(t, cfg, s, 24, 8, batchagent.Def{MaxRetries: 6})
	checkLabels(t, res)
	first := len(s.packs[0])
	if first < 3 {
		t.Skipf("the first pack had only %d agents: nothing was cut", first)
	}
	largest := 0
	for _, p := range s.packs[1:] {
		largest = max(largest, len(p))
	}
	if largest > first/2 {
		t.Errorf("after a cut answer of %d agents, a pack of %d was sent; want at most %d (sizes %v)", first, largest, first/2, packSizes(s.packs))
	}
	t.Logf("pack sizes %v", packSizes(s.packs))
	if st := e.Stats(); st.Packed+st.PackAlone != 24 {
		t.Errorf("stats: %d packed + %d alone, want 24", st.Packed, st.PackAlone)
	}
}

func packSizes(packs [][]string) []int {
	n := make([]int, len(packs))
	for i, p := range packs {
		n[i] = len(p)
	}
	return n
}

// TestPackIDsFollowInputOrder: every packed request lists its tasks in
// ascending input order under a1, a2, ...; and each agent's result is its
// own task's answer.
func TestPackIDsFollowInputOrder(t *testing.T) {
	s := &packWire{script: answerAll}
	_, res := packRun(t, s, 40, 8, batchagent.Def{})
	checkLabels(t, res)
	for _, tasks := range s.packs {
		nums := make([]int, len(tasks))
		for i, task := range tasks {
			nums[i], _ = strconv.Atoi(strings.TrimPrefix(task, "classify "))
		}
		if !slices.IsSorted(nums) || len(tasks) > 8 {
			t.Errorf("packed tasks %v: want at most 8, in input order", nums)
		}
	}
}

// TestPackBudgetFallsBack: a packed call slower than the budget leaves
// its agents to the next tier, which answers them.
func TestPackBudgetFallsBack(t *testing.T) {
	var calls atomic.Int64
	s := &packWire{script: answerAll, delay: 2 * time.Second}
	_, res := packRun(t, s, 6, 6, batchagent.Def{
		Budget: 200 * time.Millisecond,
		Fallbacks: []batchagent.Fallback{{Func: func(ctx context.Context, in batchagent.Input) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(labelOf(fmt.Sprintf("classify %v", in["n"]))), nil
		}}},
	})
	checkLabels(t, res)
	for i, r := range res {
		if r.Tier != 1 || r.Packed != 0 {
			t.Errorf("result %d: tier %d packed %d, want tier 1, not packed", i, r.Tier, r.Packed)
		}
	}
	if calls.Load() != 6 {
		t.Errorf("func tier called %d times, want 6", calls.Load())
	}
}

// TestPackBreakerSkipsDeadBackend: while the primary's breaker is open,
// no packed call is sent; the agents go straight to the next tier.
func TestPackBreakerSkipsDeadBackend(t *testing.T) {
	s := &packWire{script: answerAll}
	s.fail.Store(true)
	e, res := packRun(t, s, 60, 4, batchagent.Def{
		NoRetries: true, NoOutageBudget: true, MaxTokens: 64,
		Fallbacks: []batchagent.Fallback{{Func: func(ctx context.Context, in batchagent.Input) (json.RawMessage, error) {
			return json.RawMessage(labelOf(fmt.Sprintf("classify %v", in["n"]))), nil
		}}},
	})
	checkLabels(t, res)
	s.mu.Lock()
	sent := len(s.packs) + len(s.single)
	s.mu.Unlock()
	if sent >= 30 {
		t.Errorf("the dead backend got %d requests for 60 agents; an open breaker should have skipped most", sent)
	}
	if st := e.Stats(); st.BreakerChanges == 0 || st.ByTier[1] != 60 {
		t.Errorf("stats: %d breaker changes, by tier %v; want the breaker to open and all 60 from tier 1", st.BreakerChanges, st.ByTier)
	}
}

// TestPackStreamsEachResult: a packed call's agents get their results as
// their values close in the streamed answer, not when the answer ends:
// on the simulator's clock, the first result comes well before the last,
// and each result's inference time is its own.
func TestPackStreamsEachResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		m := newSim(t, sim.Config{Latency: 100 * time.Millisecond, PerToken: 10 * time.Millisecond, ToolTurns: -1})
		e := newEngine(t, batchagent.Config{})
		spec := mustSpec(t, batchagent.Def{Model: m, Task: "{id}", OutputSchema: json.RawMessage(outSchema), Pack: batchagent.Pack{MaxAgents: n}})
		start := time.Now()
		seq, err := e.Stream(t.Context(), spec, batchagent.Slice(inputs(n)))
		if err != nil {
			t.Fatal(err)
		}
		var at []time.Duration
		var infer []time.Duration
		for r := range seq {
			if r.Err != nil || r.Packed != n {
				t.Fatalf("result %d: packed %d, err %v; want a packed answer of %d", r.Index, r.Packed, r.Err, n)
			}
			at = append(at, time.Since(start))
			infer = append(infer, r.Timings.Inference)
		}
		if st := e.Stats(); st.PackCalls != 1 || st.ModelCalls != 1 {
			t.Fatalf("stats: %d pack calls, %d model calls; want one call for all %d agents", st.PackCalls, st.ModelCalls, n)
		}
		last := at[len(at)-1]
		if at[0] >= last || at[0] > last*2/3 {
			t.Errorf("results at %v: the first should come well before the answer ends at %v", at, last)
		}
		if infer[0] >= infer[len(infer)-1] {
			t.Errorf("inference times %v: want the first agent's shorter than the last's", infer)
		}
	})
}

// TestPackMatchesUnpacked: the simulator answers a task packed as it
// answers it alone, so packed results equal unpacked ones input by input:
// ids map every value back to its own agent. A schema with $defs and
// $refs packs too (its definitions move to the pack's root).
func TestPackMatchesUnpacked(t *testing.T) {
	refs, err := os.ReadFile("backend/sim/testdata/schemas/refs.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, sch := range map[string]string{"flat": outSchema, "refs": string(refs)} {
		t.Run(name, func(t *testing.T) {
			run := func(p batchagent.Pack) []batchagent.Result {
				_, res := runWith(t, batchagent.Config{}, batchagent.Def{
					Model: newSim(t, sim.Config{ToolTurns: -1, Seed: 7}), System: "Classify.", Task: "item {id}",
					OutputSchema: json.RawMessage(sch), Pack: p,
				}, batchagent.Slice(inputs(50)))
				return res
			}
			alone, packed := run(batchagent.Pack{}), run(batchagent.Pack{MaxAgents: 8})
			for i := range alone {
				if alone[i].Err != nil || packed[i].Err != nil || string(alone[i].Output) != string(packed[i].Output) {
					t.Errorf("input %d: unpacked %s (%v), packed %s (%v)", i, alone[i].Output, alone[i].Err, packed[i].Output, packed[i].Err)
				}
				if packed[i].Packed < 1 {
					t.Errorf("input %d not packed", i)
				}
			}
		})
	}
}

// TestPackRefusesUnresolvableRefs: a schema whose $ref points at its own
// root cannot be packed (in a pack, "#" is the pack); NewSpec says so.
func TestPackRefusesUnresolvableRefs(t *testing.T) {
	_, err := batchagent.NewSpec(batchagent.Def{
		Model: newSim(t, sim.Config{}), Task: "x",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"next":{"$ref":"#"}}}`),
		Pack:         batchagent.Pack{MaxAgents: 4},
	})
	if !errors.Is(err, batchagent.ErrBadJob) || !strings.Contains(err.Error(), `$ref "#"`) {
		t.Errorf("NewSpec = %v, want ErrBadJob naming the $ref", err)
	}
	for _, d := range []batchagent.Def{
		{Pack: batchagent.Pack{MaxAgents: -1}},
		{Pack: batchagent.Pack{MaxPromptTokens: 100}},
		{Pack: batchagent.Pack{MaxAgents: 4}, Tools: []tool.Tool{countingToolOnly()}},
	} {
		d.Model, d.Task = newSim(t, sim.Config{}), "x"
		if _, err := batchagent.NewSpec(d); !errors.Is(err, batchagent.ErrBadJob) {
			t.Errorf("NewSpec(pack %+v, %d tools) = %v, want ErrBadJob", d.Pack, len(d.Tools), err)
		}
	}
}

func countingToolOnly() tool.Tool {
	tl, _, _ := countingTool("read", 0, false)
	return tl
}

// TestPackCorruptEntriesEachEndValid: with a tenth of the packed entries
// corrupted by the simulator, every input still ends with one valid
// result; the corrupted ones ran alone.
func TestPackCorruptEntriesEachEndValid(t *testing.T) {
	m := newSim(t, sim.Config{ToolTurns: -1, Seed: 3, CorruptRate: 0.1})
	e, res := runWith(t, batchagent.Config{}, batchagent.Def{
		Model: m, Task: "item {id}", OutputSchema: json.RawMessage(outSchema), Pack: batchagent.Pack{MaxAgents: 10},
	}, batchagent.Slice(inputs(300)))
	for i, r := range res {
		if r.Err != nil || r.Index != i {
			t.Fatalf("result %d: index %d err %v", i, r.Index, r.Err)
		}
	}
	st := e.Stats()
	if st.PackAlone == 0 || st.Packed+st.PackAlone != 300 {
		t.Errorf("stats: %d packed, %d alone; want some alone and 300 in all", st.Packed, st.PackAlone)
	}
	if st.AgentsCalling != 0 || st.AgentsInTools != 0 || st.AgentsWaiting != 0 {
		t.Errorf("after the run: %d agents calling, %d in tools, %d waiting; want none", st.AgentsCalling, st.AgentsInTools, st.AgentsWaiting)
	}
}

// TestTierAndPackSurviveCheckpoint: a resumed run reports the tier and
// the pack of the results it restores, as the first run did.
func TestTierAndPackSurviveCheckpoint(t *testing.T) {
	store, err := checkpoint.Open(filepath.Join(t.TempDir(), "state.db"), checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	def := batchagent.Def{ID: "tiers", Model: newSim(t, sim.Config{ToolTurns: -1}), Task: "{id}",
		OutputSchema: json.RawMessage(outSchema), Pack: batchagent.Pack{MaxAgents: 4}}
	run := func() []batchagent.Result {
		_, res := runWith(t, batchagent.Config{Checkpoint: store}, def, batchagent.Slice(inputs(8)))
		return res
	}
	first, again := run(), run()
	for i := range first {
		if first[i].Packed < 1 || again[i].Packed != first[i].Packed || again[i].Tier != first[i].Tier {
			t.Errorf("input %d: first packed %d tier %d, restored packed %d tier %d", i, first[i].Packed, first[i].Tier, again[i].Packed, again[i].Tier)
		}
	}
	var calls atomic.Int64
	def.ID, def.Pack = "tier1", batchagent.Pack{}
	def.Model = newSim(t, sim.Config{ToolTurns: -1, FailRate: 1})
	def.NoRetries, def.NoOutageBudget = true, true
	def.Fallbacks = []batchagent.Fallback{{Func: heuristic(&calls)}}
	first, again = run(), run()
	for i := range first {
		if first[i].Tier != 1 || again[i].Tier != 1 {
			t.Errorf("input %d: tier %d, restored tier %d; want 1 both", i, first[i].Tier, again[i].Tier)
		}
	}
	if calls.Load() != 8 {
		t.Errorf("func tier called %d times, want 8 (the resumed run restores)", calls.Load())
	}
}
