package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// The agentic scenario: N agents whose turn counts and tool latencies are
// heavy-tailed, against the HTTP simulator with a finite KV cache, through
// the OpenAI backend. Its sizes, all at time scale 1 (see
// AgenticOptions.TimeScale):
//
//   - turns per agent (model calls): lognormal, median 4, p95 20, at
//     least 1 and at most 40; every turn but the last calls one tool;
//   - tool latency: lognormal, median 300 ms, p95 5 s, at most 10 s;
//   - a shared system prompt of about 1,000 tokens, then each agent's own
//     conversation, growing by a tool call and a ~100-token result a turn;
//   - the server: 16 sequence slots, the calibrated timing model, and a
//     KV cache of 131,072 tokens (8,192 blocks). The running batch needs at
//     most about 16 × 5,000 tokens, so the cache can keep the prefixes of
//     only a few dozen agents between their turns: an order that keeps
//     the agents in flight few keeps their prefixes cached, one that
//     interleaves all 2,000 recomputes them (about 0.25 s of prefill per
//     1,000 tokens).
const (
	// DefaultAgenticN is the agentic scenario's number of agents.
	DefaultAgenticN = 2000
	// DefaultAgenticTimeScale is the agentic scenario's default time
	// scale: a twentieth of real time. Below it the client's own CPU time
	// (about 1 ms a call, engine and simulator together) starts to count
	// on two shared cores; at it the engine modes take about 25 s each and
	// the baselines, which recompute evicted prefixes, about 125 s. The
	// engine's scheduling counts waits in calls served, not in seconds
	// (sched.Config.Boost), so what it measures holds at any scale.
	DefaultAgenticTimeScale = 0.05
	agenticSlots            = 16
	// agenticHeadroom is how many calls beyond the server's slots the
	// engine keeps in flight: up to that many wait in the server's queue,
	// as the engine's backpressure allows by default
	// (batchagent.DefaultMaxQueued), so a slot that frees up finds its
	// next request there instead of waiting for the client's round trip.
	agenticHeadroom = 4
	agenticKVTokens = 8192 * 16
	agenticMaxTurns = 40
	// agenticContinuation is the continuation window of the +cont modes,
	// at time scale 1.
	agenticContinuation = 2 * time.Second
	agenticTask         = "Investigate ticket agent: {id} and report what you find. sim_tool_turns={tools}"
)

// agenticModes are the agentic scenario's modes: the default list, then
// the ones run only when asked for.
var (
	agenticModes      = []string{"naive", "fifo", "turns", "las", "engine"}
	agenticExtraModes = []string{"fifo+cont", "turns+cont", "las+cont"}
)

// agenticSystem is the shared prefix: about 1,000 tokens.
var agenticSystem = rulesPrompt("You are a support engineer who investigates tickets step by step with the step tool.\n",
	"call the step tool for each step, read its result, and answer only once the investigation is complete.", 4000)

// agenticToolSpec is the step tool: its query argument is generated anew
// every turn, so no two calls are alike.
var agenticToolSpec = tool.Spec{
	Name:        "step",
	Description: "Runs one step of an investigation and returns what it found.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"agent":{"type":"string"},"query":{"type":"string"}},"required":["agent","query"]}`),
}

// AgenticOptions configures the agentic scenario.
type AgenticOptions struct {
	// N is the number of agents. Defaults to DefaultAgenticN.
	N int
	// Seed seeds the agents' turn counts and tool latencies, and the
	// simulator. Defaults to 1.
	Seed uint64
	// Modes lists the modes to run: naive, fifo, turns, las, engine (the
	// default policy), and fifo+cont, turns+cont, las+cont (with
	// cache-aware continuation). Empty means naive, fifo, turns, las and
	// engine.
	Modes []string
	// TimeScale scales every duration of the scenario: the tools'
	// latencies, the simulator's step times and the continuation window.
	// Reported times are as measured, at this scale. Defaults to
	// DefaultAgenticTimeScale.
	TimeScale float64
	// JSON prints one JSON object per mode instead of a line.
	JSON bool
}

// AgenticReport is one mode of the agentic scenario. Times are seconds at
// the run's time scale.
type AgenticReport struct {
	Scenario string `json:"scenario"`
	Mode     string `json:"mode"`
	// Policy is the engine's scheduling policy (empty for naive), with
	// "+cont" when cache-aware continuation is on; mode engine names the
	// default policy.
	Policy string  `json:"policy,omitempty"`
	N      int     `json:"n"`
	WallS  float64 `json:"wall_s"`
	// MeanDoneS and P95DoneS are the agents' completion times from the
	// start; MakespanS the last one's.
	MeanDoneS float64 `json:"mean_done_s"`
	P95DoneS  float64 `json:"p95_done_s"`
	MakespanS float64 `json:"makespan_s"`
	// BoundS is the work-conserving bound: the server's total service time
	// (each sequence's prefill and decode time) over its slots;
	// MakespanRatio is MakespanS / BoundS.
	BoundS        float64 `json:"bound_s"`
	MakespanRatio float64 `json:"makespan_ratio"`
	// Busy is the share of the makespan the server ran steps.
	Busy float64 `json:"busy"`
	// CachedShare is cached prompt tokens over prompt tokens, as the
	// server counted them; PrefillTokens the prompt tokens it computed,
	// RecomputedTokens those it had cached before and evicted.
	CachedShare      float64 `json:"cached_share"`
	PrefillTokens    int64   `json:"prefill_tokens"`
	RecomputedTokens int64   `json:"recomputed_tokens"`
	// CacheLostShare is the share of turns after an agent's first whose
	// cached prefix had been evicted since its previous turn.
	CacheLostShare float64 `json:"cache_lost_share"`
	Evictions      int64   `json:"evictions"`
	// OK counts the agents that answered after their scripted number of
	// turns; Failed the others.
	OK        int     `json:"ok"`
	Failed    int     `json:"failed"`
	LLMCalls  int64   `json:"llm_calls"`
	ToolCalls int64   `json:"tool_calls"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	CPUS      float64 `json:"cpu_s"`
	TimeScale float64 `json:"time_scale"`
	// MeanVsNaive is naive's MeanDoneS over this mode's, and
	// MakespanVsNaive this mode's MakespanS over naive's, when naive ran
	// first.
	MeanVsNaive     *float64 `json:"mean_vs_naive,omitempty"`
	MakespanVsNaive *float64 `json:"makespan_vs_naive,omitempty"`
}

// agenticAgent is one agent's script.
type agenticAgent struct {
	turns int             // model calls: turns-1 tool turns, then the answer
	tools []time.Duration // each tool call's latency, scaled
}

// agenticScripts draws the agents' scripts from seed.
func agenticScripts(n int, seed uint64, scale float64) []agenticAgent {
	r := rand.New(rand.NewPCG(seed, 0x61676e74))
	// Lognormal with median m and 95th percentile p: σ = ln(p/m) / 1.645.
	logn := func(median, p95 float64) float64 {
		return median * math.Exp(math.Log(p95/median)/1.6449*r.NormFloat64())
	}
	agents := make([]agenticAgent, n)
	for i := range agents {
		turns := min(max(int(math.Round(logn(4, 20))), 1), agenticMaxTurns)
		a := agenticAgent{turns: turns, tools: make([]time.Duration, turns-1)}
		for k := range a.tools {
			d := min(logn(0.3, 5), 10) * scale
			a.tools[k] = time.Duration(d * float64(time.Second))
		}
		agents[i] = a
	}
	return agents
}

// RunAgentic runs the agentic scenario: each mode against a fresh server
// (cold cache), the same agents every time.
func RunAgentic(ctx context.Context, opt AgenticOptions, w io.Writer) ([]AgenticReport, error) {
	if opt.N < 0 || opt.TimeScale < 0 || math.IsNaN(opt.TimeScale) || math.IsInf(opt.TimeScale, 0) {
		return nil, errors.New("bench: agentic wants -n ≥ 0 and a finite --time-scale ≥ 0")
	}
	if opt.N == 0 {
		opt.N = DefaultAgenticN
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	if opt.TimeScale == 0 {
		opt.TimeScale = DefaultAgenticTimeScale
	}
	modes := opt.Modes
	if len(modes) == 0 {
		modes = agenticModes
	}
	for _, m := range modes {
		if !slices.Contains(agenticModes, m) && !slices.Contains(agenticExtraModes, m) {
			return nil, fmt.Errorf("bench: unknown mode %q for agentic (known: %s)", m, strings.Join(append(slices.Clone(agenticModes), agenticExtraModes...), ", "))
		}
	}
	agents := agenticScripts(opt.N, opt.Seed, opt.TimeScale)
	var reports []AgenticReport
	for _, mode := range modes {
		r, err := agenticRun(ctx, opt, agents, mode)
		if err != nil {
			return reports, fmt.Errorf("bench agentic %s: %w", mode, err)
		}
		if len(reports) > 0 && reports[0].Mode == "naive" && r.MeanDoneS > 0 {
			nv := reports[0]
			r.MeanVsNaive = ptr(round(nv.MeanDoneS/r.MeanDoneS, 3))
			r.MakespanVsNaive = ptr(round(r.MakespanS/nv.MakespanS, 3))
		}
		reports = append(reports, r)
		if opt.JSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(w, string(b))
			continue
		}
		fmt.Fprintf(w, "agentic %-10s %-10s n=%d  mean %.2fs  p95 %.2fs  makespan %.2fs  bound %.2fs (×%.2f)  busy %.0f%%  cached %.1f%%  recomputed %d  lost %.1f%%  ok %d  failed %d  llm_calls %d\n",
			r.Mode, r.Policy, r.N, r.MeanDoneS, r.P95DoneS, r.MakespanS, r.BoundS, r.MakespanRatio, 100*r.Busy, 100*r.CachedShare,
			r.RecomputedTokens, 100*r.CacheLostShare, r.OK, r.Failed, r.LLMCalls)
	}
	return reports, nil
}

// agenticPolicy returns the engine admission of mode and the policy's
// name; ok is false for naive. Modes fifo, turns and las run without
// continuation and their +cont forms with it (agenticContinuation, scaled
// like every duration); engine runs the defaults (DefaultPolicy, no
// continuation).
func agenticPolicy(mode string, scale float64) (a batchagent.Admission, name string, ok bool, err error) {
	a = batchagent.Admission{MaxInflight: agenticSlots + agenticHeadroom, FixedInflight: true, Backpressure: batchagent.Backpressure{Disabled: true}}
	base, cont := strings.CutSuffix(mode, "+cont")
	switch base {
	case "naive":
		return a, "", false, nil
	case "engine":
		if cont {
			return a, "", false, fmt.Errorf("unknown mode %q", mode)
		}
		return a, string(batchagent.DefaultPolicy), true, nil
	case "fifo", "turns", "las":
		a.Policy = batchagent.Policy(base)
	default:
		return a, "", false, fmt.Errorf("unknown mode %q", mode)
	}
	if cont {
		a.Continuation = time.Duration(float64(agenticContinuation) * scale)
	}
	return a, mode, true, nil
}

// agenticTool returns the step tool: agent i's k-th call sleeps its
// scripted latency and returns a ~100-token result.
func agenticTool(agents []agenticAgent) (tool.Tool, *atomic.Int64) {
	calls := make([]atomic.Int32, len(agents))
	var total atomic.Int64
	return tool.Func(agenticToolSpec, func(ctx context.Context, args json.RawMessage) (string, error) {
		var a struct {
			Agent string `json:"agent"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return "", fmt.Errorf("step: arguments: %w", err)
		}
		i, err := strconv.Atoi(a.Agent)
		if err != nil || i < 0 || i >= len(agents) {
			return "", fmt.Errorf("step: agent %q is not one of the %d agents", a.Agent, len(agents))
		}
		k := int(calls[i].Add(1)) - 1
		total.Add(1)
		if k < len(agents[i].tools) {
			t := time.NewTimer(agents[i].tools[k])
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return fmt.Sprintf("Step %d for agent %d: %s", k+1, i, agenticFinding), nil
	}), &total
}

// agenticFinding is the body of a step's result: about 100 tokens.
var agenticFinding = strings.Repeat("the logs show a retry storm after the deploy; ", 8)

// agenticRun runs one mode against a fresh server.
func agenticRun(ctx context.Context, opt AgenticOptions, agents []agenticAgent, mode string) (AgenticReport, error) {
	adm, policy, isEngine, err := agenticPolicy(mode, opt.TimeScale)
	if err != nil {
		return AgenticReport{}, err
	}
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * opt.TimeScale) }
	srv, m, stop, err := serveSim(ctx, simhttp.Config{
		Model:            sim.Config{Seed: opt.Seed},
		MaxSeqs:          agenticSlots,
		MaxQueue:         -1,
		PrefillPerToken:  scale(simhttp.DefaultPrefillPerToken),
		DecodeStep:       scale(simhttp.DefaultDecodeStep),
		DecodeStepPerSeq: scale(simhttp.DefaultDecodeStepPerSeq),
		KVCacheTokens:    agenticKVTokens,
	})
	if err != nil {
		return AgenticReport{}, err
	}
	defer stop()
	r := AgenticReport{Scenario: "agentic", Mode: mode, Policy: policy, N: len(agents), TimeScale: opt.TimeScale}
	stepTool, toolCalls := agenticTool(agents)
	debug.FreeOSMemory()
	resetPeakRSS()
	cpu0 := cpuTime()
	done := make([]time.Duration, len(agents))
	turns := make([]int, len(agents))
	failed := make([]error, len(agents))
	start := time.Now()
	if isEngine {
		err = agenticEngine(ctx, m, adm, stepTool, agents, start, done, turns, failed)
	} else {
		err = agenticNaive(ctx, m, stepTool, agents, start, done, turns, failed)
	}
	wall := time.Since(start)
	if err != nil {
		return r, err
	}
	st := srv.Stats()
	var sum time.Duration
	for i := range agents {
		sum += done[i]
		if failed[i] == nil && turns[i] == agents[i].turns {
			r.OK++
		} else {
			r.Failed++
		}
	}
	makespan := slices.Max(done)
	bound := st.ServiceTime / agenticSlots
	r.WallS = round(wall.Seconds(), 3)
	r.MeanDoneS = round((sum / time.Duration(len(agents))).Seconds(), 3)
	r.P95DoneS = round(percentile(done, 0.95).Seconds(), 3)
	r.MakespanS = round(makespan.Seconds(), 3)
	r.BoundS = round(bound.Seconds(), 3)
	if bound > 0 {
		r.MakespanRatio = round(makespan.Seconds()/bound.Seconds(), 3)
	}
	if makespan > 0 {
		r.Busy = round(st.BusyTime.Seconds()/makespan.Seconds(), 3)
	}
	if st.PromptTokens > 0 {
		r.CachedShare = round(float64(st.CachedTokens)/float64(st.PromptTokens), 4)
	}
	r.PrefillTokens, r.RecomputedTokens, r.Evictions = st.PrefillTokens, st.RecomputedTokens, st.Evictions
	if later := st.Requests - int64(len(agents)); later > 0 {
		r.CacheLostShare = round(float64(st.LostPrefixes)/float64(later), 4)
	}
	r.LLMCalls = st.Requests
	r.ToolCalls = toolCalls.Load()
	r.PeakRSSMB = round(peakRSSMB(), 1)
	r.CPUS = round((cpuTime() - cpu0).Seconds(), 3)
	return r, ctx.Err()
}

// agenticInputs are the agents' inputs: id and tool turns.
func agenticInputs(agents []agenticAgent) []batchagent.Input {
	in := make([]batchagent.Input, len(agents))
	for i, a := range agents {
		in[i] = batchagent.Input{"id": strconv.Itoa(i), "tools": a.turns - 1}
	}
	return in
}

func agenticEngine(ctx context.Context, m *openai.Model, adm batchagent.Admission, stepTool tool.Tool, agents []agenticAgent,
	start time.Time, done []time.Duration, turns []int, failed []error) error {
	cfg := batchagent.Config{MaxActive: len(agents), Admission: adm}
	_, err := stream(ctx, cfg, batchagent.Def{
		ID:         "agentic",
		Model:      m,
		System:     agenticSystem,
		Task:       agenticTask,
		Tools:      []tool.Tool{stepTool},
		MaxTurns:   agenticMaxTurns + 1,
		MaxRetries: 5,
	}, batchagent.Slice(agenticInputs(agents)), func(res batchagent.Result) error {
		if res.Index < 0 || res.Index >= len(agents) {
			return fmt.Errorf("bench: result for index %d of %d agents", res.Index, len(agents))
		}
		done[res.Index] = time.Since(start)
		turns[res.Index] = res.Turns
		failed[res.Index] = res.Err
		return nil
	})
	return err
}

// agenticNaive is the straightforward client: a goroutine per agent in an
// errgroup, and a semaphore of the server's slot count held only during
// each model call (FIFO: x/sync/semaphore serves waiters in order).
func agenticNaive(ctx context.Context, m *openai.Model, stepTool tool.Tool, agents []agenticAgent,
	start time.Time, done []time.Duration, turns []int, failed []error) error {
	sem := semaphore.NewWeighted(agenticSlots)
	spec := stepTool.Spec()
	tools := []llm.ToolDef{{Name: spec.Name, Description: spec.Description, Parameters: spec.Parameters}}
	inputs := agenticInputs(agents)
	var g errgroup.Group
	for i := range agents {
		g.Go(func() error {
			turns[i], failed[i] = naiveAgentic(ctx, m, sem, stepTool, tools, inputs[i])
			done[i] = time.Since(start)
			return nil
		})
	}
	_ = g.Wait() // the agents return nil: their errors are in failed
	return ctx.Err()
}

func naiveAgentic(ctx context.Context, m *openai.Model, sem *semaphore.Weighted, stepTool tool.Tool, tools []llm.ToolDef, in batchagent.Input) (turns int, err error) {
	task := strings.NewReplacer("{id}", fmt.Sprint(in["id"]), "{tools}", fmt.Sprint(in["tools"])).Replace(agenticTask)
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: agenticSystem}, {Role: llm.RoleUser, Content: task}}
	for turns <= agenticMaxTurns {
		if err := sem.Acquire(ctx, 1); err != nil {
			return turns, err
		}
		var acc llm.Accumulator
		for ev, e := range m.Stream(ctx, &llm.Request{Messages: msgs, Tools: tools}) {
			if e != nil {
				err = e
				break
			}
			acc.Add(ev)
		}
		sem.Release(1)
		if err != nil {
			return turns, err
		}
		turns++
		resp := acc.Response()
		msgs = append(msgs, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			return turns, nil
		}
		for _, c := range resp.Message.ToolCalls {
			out, err := stepTool.Call(ctx, c.Arguments)
			if err != nil {
				out = "error: " + err.Error()
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: out})
		}
	}
	return turns, errors.New("max turns")
}
