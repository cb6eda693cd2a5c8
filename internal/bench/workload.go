package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
)

// The workload every scenario shares: turn 1 reads one shared document,
// turn 2 answers {"value": int, "first_word": string}.
const (
	system     = "You answer questions about documents. Read the document you are given before answering."
	task       = "Read the shared document path: doc.txt and report on item {id}."
	outSchema  = `{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`
	docText    = "Batch inference is a scheduling problem as much as a modelling one.\n"
	scaleInput = "inputs.jsonl"
)

// workload describes one scenario.
type workload struct {
	name        string
	n           int
	latency     time.Duration // per forward pass
	toolDelay   time.Duration // per tool execution; zero means single-turn agents without tools
	maxInflight int           // zero means unlimited
	fail        float64
	files       bool // inputs from a JSONL file, results to a JSONL file
	seed        uint64
	server      bool          // against the HTTP simulator
	serverIdeal time.Duration // one request alone on a fresh server
	state       bool          // engine mode checkpoints into a SQLite store
	dedup       bool          // the dedup scenario, whose modes are its own
}

// ideal is the physical limit of the scenario in mode: one agent's
// critical path, or the total forward-pass work divided by the slots when
// that is longer.
func (wl workload) ideal(mode string, maxRetried int) time.Duration {
	switch {
	case wl.server:
		return wl.serverIdeal
	case wl.dedup:
		return dedupIdeal(wl, mode)
	}
	turns := 1
	if wl.toolDelay > 0 {
		turns = 2
	}
	crit := time.Duration(turns+maxRetried)*wl.latency + wl.toolDelay
	if wl.maxInflight > 0 {
		work := time.Duration(wl.n*turns) * wl.latency / time.Duration(wl.maxInflight)
		crit = max(crit, work)
	}
	return crit
}

// env holds the files of a scenario run.
type env struct {
	dir     string
	cleanup bool
}

func newEnv(dir string, wl workload) (*env, error) {
	e := &env{dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "batchagent-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.dir, e.cleanup = d, true
	}
	if err := os.WriteFile(filepath.Join(e.dir, "doc.txt"), []byte(docText), 0o644); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if wl.files {
		f, err := os.Create(filepath.Join(e.dir, scaleInput))
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		bw := bufio.NewWriter(f)
		for i := range wl.n {
			fmt.Fprintf(bw, "{\"id\":\"%d\"}\n", i)
		}
		if err := bw.Flush(); err != nil {
			f.Close()
			return nil, fmt.Errorf("bench: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	return e, nil
}

func (e *env) close() {
	if e.cleanup {
		os.RemoveAll(e.dir)
	}
}

// readTool is the built-in read_file over the scenario's directory, slowed
// to the scenario's tool latency.
func (e *env) readTool(wl workload) (tool.Tool, error) {
	rf, err := filetool.ReadFile(filetool.ReadFileConfig{Roots: []string{e.dir}, Cacheable: true})
	if err != nil {
		return nil, err
	}
	return tool.Func(rf.Spec(), func(ctx context.Context, args json.RawMessage) (string, error) {
		t := time.NewTimer(wl.toolDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return rf.Call(ctx, args)
	}), nil
}

func (e *env) model(wl workload) (*sim.Model, error) {
	cfg := sim.Config{Latency: wl.latency, FailRate: wl.fail, Seed: wl.seed, ToolTurns: -1}
	if wl.toolDelay > 0 {
		cfg.ToolTurns = 1
	}
	return sim.New(cfg)
}

// tally is what a mode's run produced.
type tally struct {
	ok, failed        int
	maxRetried        int
	toolReq, toolExec int64
	llmCalls          int64
	// How the tool calls that did not execute were saved (dedup only).
	cacheHits, coalesced, batches int64
}

// measure runs one mode and reports it.
func measure(ctx context.Context, e *env, wl workload, mode string) (Report, error) {
	// Start each mode from the same place: the last mode's garbage
	// collected and its memory given back, the peak-RSS mark reset.
	debug.FreeOSMemory()
	resetPeakRSS()
	cpu0 := cpuTime()
	start := time.Now()
	var (
		t   tally
		err error
		sr  serverRun
	)
	switch {
	case wl.server:
		var wall time.Duration
		sr, wall, err = runServer(ctx, wl, mode)
		t = sr.tally
		start = time.Now().Add(-wall) // the server's own start is not the clients' work
	case wl.dedup:
		t, err = runDedup(ctx, e, wl, mode)
	case mode == "engine", mode == "engine+state":
		ewl := wl
		ewl.state = mode == "engine+state"
		t, err = runEngine(ctx, e, ewl)
	default:
		t, err = runNaive(ctx, e, wl)
	}
	wall := time.Since(start)
	if err != nil {
		return Report{}, fmt.Errorf("bench %s %s: %w", wl.name, mode, err)
	}
	ideal := wl.ideal(mode, t.maxRetried)
	rep := Report{
		Scenario:      wl.name,
		Mode:          mode,
		N:             wl.n,
		WallS:         round(wall.Seconds(), 4),
		IdealS:        round(ideal.Seconds(), 4),
		Ratio:         round(wall.Seconds()/ideal.Seconds(), 3),
		AgentsPerS:    round(float64(wl.n)/wall.Seconds(), 0),
		OK:            t.ok,
		Failed:        t.failed,
		ToolRequested: t.toolReq,
		ToolExecuted:  t.toolExec,
		LLMCalls:      t.llmCalls,
		PeakRSSMB:     round(peakRSSMB(), 1),
		CPUS:          round((cpuTime() - cpu0).Seconds(), 3),
		MaxRetried:    t.maxRetried,
		MaxInflight:   wl.maxInflight,
		ToolCacheHits: t.cacheHits,
		ToolCoalesced: t.coalesced,
		ToolBatches:   t.batches,
	}
	if wl.server {
		p50, p95, shareV := cacheStats(sr.ttfts, sr.prompt, sr.cached)
		rejected := sr.rejected
		rep.TTFTP50S, rep.TTFTP95S, rep.CachedShare, rep.HTTP429 = &p50, &p95, &shareV, &rejected
		rep.ServerRequests = sr.serverCalls
	}
	return rep, nil
}

func runEngine(ctx context.Context, e *env, wl workload) (tally, error) {
	m, err := e.model(wl)
	if err != nil {
		return tally{}, err
	}
	j := batchagent.Def{
		ID:           wl.name,
		Model:        m,
		System:       system,
		Task:         task,
		OutputSchema: json.RawMessage(outSchema),
	}
	cfg := batchagent.Config{
		Admission: batchagent.Admission{MaxInflight: wl.maxInflight},
		// All agents start at once, as the ideal assumes; at scale the
		// default bound keeps memory flat.
		MaxActive: wl.n,
	}
	if wl.files {
		cfg.MaxActive = 0
	}
	if wl.toolDelay > 0 {
		rt, err := e.readTool(wl)
		if err != nil {
			return tally{}, err
		}
		j.Tools = []tool.Tool{rt}
	}
	if wl.state {
		path := filepath.Join(e.dir, fmt.Sprintf("state-%d.db", time.Now().UnixNano()))
		store, err := checkpoint.Open(path, checkpoint.Config{})
		if err != nil {
			return tally{}, err
		}
		defer store.Close()
		spec, err := batchagent.NewSpec(j)
		if err != nil {
			return tally{}, err
		}
		if _, err := store.Begin(ctx, j.ID, spec.Fingerprint(), false); err != nil {
			return tally{}, err
		}
		cfg.Checkpoint = store
	}
	in, out, closeIO, err := e.io(wl)
	if err != nil {
		return tally{}, err
	}
	var t tally
	st, err := stream(ctx, cfg, j, in, func(r batchagent.Result) error {
		t.count(r)
		if out != nil {
			return out.Write(r)
		}
		return nil
	})
	if err != nil {
		closeIO()
		return t, err
	}
	if err := closeIO(); err != nil {
		return t, err
	}
	t.toolExec = st.ToolExecuted
	return t, ctx.Err()
}

func (t *tally) count(r batchagent.Result) {
	if r.Err == nil {
		t.ok++
	} else {
		t.failed++
	}
	t.maxRetried = max(t.maxRetried, r.ModelCalls-r.Turns)
	t.toolReq += int64(r.ToolCalls)
	t.llmCalls += int64(r.ModelCalls)
}

// io opens the scenario's inputs and, for file scenarios, its output.
func (e *env) io(wl workload) (batchagent.Inputs, *outfile.Writer, func() error, error) {
	if !wl.files {
		return batchagent.Slice(ids(wl.n)), nil, func() error { return nil }, nil
	}
	in, err := os.Open(filepath.Join(e.dir, scaleInput))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bench: %w", err)
	}
	of, err := os.Create(filepath.Join(e.dir, "results.jsonl"))
	if err != nil {
		in.Close()
		return nil, nil, nil, fmt.Errorf("bench: %w", err)
	}
	out := outfile.NewWriter(of, false)
	closeIO := func() error {
		in.Close()
		err := out.Close()
		if cerr := of.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return batchagent.JSONL(bufio.NewReaderSize(in, 64<<10), scaleInput), out, closeIO, nil
}

// runNaive is the straightforward Go baseline: one goroutine per input in
// an errgroup, the model called directly, every tool call executed, the
// slot (when the scenario limits them) held for the agent's whole life, and
// transient failures retried after a fixed 1s, then 2s, pause.
func runNaive(ctx context.Context, e *env, wl workload) (tally, error) {
	m, err := e.model(wl)
	if err != nil {
		return tally{}, err
	}
	sch, err := schema.Compile(json.RawMessage(outSchema))
	if err != nil {
		return tally{}, err
	}
	tmpl, err := job.ParseTemplate(task)
	if err != nil {
		return tally{}, err
	}
	var (
		rt    tool.Tool
		tools []llm.ToolDef
	)
	if wl.toolDelay > 0 {
		if rt, err = e.readTool(wl); err != nil {
			return tally{}, err
		}
		s := rt.Spec()
		tools = []llm.ToolDef{{Name: s.Name, Description: s.Description, Parameters: s.Parameters}}
	}
	in, out, closeIO, err := e.io(wl)
	if err != nil {
		return tally{}, err
	}
	var slots chan struct{}
	if wl.maxInflight > 0 {
		slots = make(chan struct{}, wl.maxInflight) // one token per slot
	}
	var (
		mu sync.Mutex // protects t and out
		t  tally
	)
	g, ctx := errgroup.WithContext(ctx)
	i := 0
	for input, err := range in {
		idx := i
		i++
		g.Go(func() error {
			r := batchagent.Result{Index: idx, Input: input, Err: err}
			if err == nil {
				r = naiveAgent(ctx, m, sch, tmpl, rt, tools, slots, idx, input)
			}
			mu.Lock()
			defer mu.Unlock()
			t.count(r)
			if rt != nil {
				t.toolExec += int64(r.ToolCalls)
			}
			if out != nil {
				return out.Write(r)
			}
			return nil
		})
	}
	err = g.Wait()
	if cerr := closeIO(); err == nil {
		err = cerr
	}
	return t, err
}

func naiveAgent(ctx context.Context, m *sim.Model, sch *schema.Schema, tmpl *job.Template, rt tool.Tool,
	tools []llm.ToolDef, slots chan struct{}, idx int, input batchagent.Input) batchagent.Result {
	r := batchagent.Result{Index: idx, Input: input}
	if slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			r.Err = ctx.Err()
			return r
		}
	}
	text, err := tmpl.Render(input)
	if err != nil {
		r.Err = err
		return r
	}
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: system + "\n\n" + sch.Instructions()},
		{Role: llm.RoleUser, Content: text},
	}
	for r.Turns < 8 {
		req := &llm.Request{Messages: msgs, Tools: tools, Output: &llm.OutputSpec{Schema: sch.Raw()}}
		var resp *llm.Response
		for attempt := 0; ; attempt++ {
			r.ModelCalls++
			resp, err = m.Generate(ctx, req)
			if err == nil || !llm.IsTransient(err) || attempt == 2 {
				break
			}
			t := time.NewTimer(time.Duration(attempt+1) * time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			if ctx.Err() != nil {
				err = ctx.Err()
				break
			}
		}
		if err != nil {
			r.Err = err
			return r
		}
		r.Turns++
		r.Usage = r.Usage.Add(resp.Usage)
		msgs = append(msgs, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			r.Raw = resp.Message.Content
			r.Output, r.Err = sch.Parse(resp.Message.Content)
			return r
		}
		for _, c := range resp.Message.ToolCalls {
			r.ToolCalls++
			res, err := rt.Call(ctx, c.Arguments)
			if err != nil {
				res = "error: " + err.Error()
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: res})
		}
	}
	r.Err = fmt.Errorf("max turns")
	return r
}

// round rounds v to digits decimal places.
func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the kernel's peak-RSS mark (Linux), so each mode
// reports its own peak.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSSMB reads the peak resident set size (VmHWM) in MB.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}
