package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// Defaults of the provider-batch scenario.
const (
	// DefaultProviderBatchN is the scenario's number of agents.
	DefaultProviderBatchN = 1000
	// ProviderBatchDelay is how long the simulated batch endpoint takes
	// to complete a batch, at the least.
	ProviderBatchDelay = time.Second
	// providerBatchModel is the model the scenario's job names: one with
	// a batch price in the built-in table, so that the run reports its
	// cost at it.
	providerBatchModel = "gpt-4o-mini"
)

// ProviderBatchOptions configures the provider-batch scenario.
type ProviderBatchOptions struct {
	// N is the number of agents. Defaults to DefaultProviderBatchN.
	N int
	// KillAt, when positive, SIGKILLs the batch run once the simulated
	// endpoint has received that many batches, and runs it again to the
	// end: the journal must resume the batches submitted, never
	// submitting a call twice.
	KillAt int
	// Dir holds the scenario's files. Defaults to a temporary directory.
	Dir string
	// JSON prints one JSON object instead of a table row.
	JSON bool
}

// ProviderBatchReport is the provider-batch scenario's line.
type ProviderBatchReport struct {
	Scenario string  `json:"scenario"`
	N        int     `json:"n"`
	WallS    float64 `json:"wall_s"`
	OK       int     `json:"ok"`
	Failed   int     `json:"failed"`
	// Cost is what the batch run's results cost at the batch price;
	// RealtimeCost what the same job's results cost run in real time;
	// CostRatio the first over the second.
	Cost         float64 `json:"cost"`
	RealtimeCost float64 `json:"realtime_cost"`
	CostRatio    float64 `json:"cost_ratio"`
	// Submissions counts the batches the endpoint received, Lines their
	// lines; Rounds is the most model calls one agent made through them
	// (the batch rounds the run took).
	Submissions int `json:"submissions"`
	Lines       int `json:"lines"`
	Rounds      int `json:"rounds"`
	// KillAt is the batch count at which the run was killed (0: not
	// killed); DuplicateSubmissions counts the custom_ids the endpoint
	// received in more than one batch: calls submitted twice.
	KillAt               int `json:"kill_at"`
	DuplicateSubmissions int `json:"duplicate_submissions"`
}

// RunProviderBatch runs the provider-batch scenario: N three-turn
// tool-using agents (two tool turns, then the answer) of a job file run
// by `batchagent run` (exe) through the simulator's OpenAI batch endpoint
// (Files and Batches, each batch completing after ProviderBatchDelay),
// and the same job in real time against the same simulator, for the cost
// ratio. With KillAt the batch run is SIGKILLed once and resumed.
func RunProviderBatch(ctx context.Context, exe string, opt ProviderBatchOptions, w io.Writer) (ProviderBatchReport, error) {
	r := ProviderBatchReport{Scenario: "provider-batch", N: opt.N, KillAt: opt.KillAt}
	if opt.N < 0 || opt.KillAt < 0 {
		return r, errors.New("bench: provider-batch wants -n ≥ 0 and --kill-at ≥ 0")
	}
	if r.N == 0 {
		r.N = DefaultProviderBatchN
	}
	dir := opt.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "batchagent-provider-batch-")
		if err != nil {
			return r, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	sim, err := startBatchSim(ctx, ProviderBatchDelay)
	if err != nil {
		return r, err
	}
	defer sim.stop()
	if err := os.WriteFile(filepath.Join(dir, "doc.txt"), []byte("the shared document\n"), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	var in strings.Builder
	for i := range r.N {
		fmt.Fprintf(&in, "{\"id\": %d}\n", i)
	}
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}

	// In real time first: what the same calls cost at full price.
	rtJob, err := writeProviderBatchJob(dir, "realtime", sim.addr, false)
	if err != nil {
		return r, err
	}
	rtOut := filepath.Join(dir, "realtime.jsonl")
	if err := runJob(ctx, exe, rtJob, inPath, rtOut, nil); err != nil {
		return r, err
	}
	rt, err := readProviderBatchResults(rtOut, r.N)
	if err != nil {
		return r, err
	}
	if rt.failed > 0 {
		return r, fmt.Errorf("bench: the real-time run failed %d of %d inputs", rt.failed, r.N)
	}
	r.RealtimeCost = rt.cost

	job, err := writeProviderBatchJob(dir, "batch", sim.addr, true)
	if err != nil {
		return r, err
	}
	out := filepath.Join(dir, "batch.jsonl")
	start := time.Now()
	if opt.KillAt > 0 {
		killed := false
		err := runJob(ctx, exe, job, inPath, out, func(cmd *exec.Cmd) bool {
			st, err := sim.stats(ctx)
			if err != nil || st.Batches < int64(opt.KillAt) {
				return false
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
			return true
		})
		if !killed {
			if err != nil {
				return r, err
			}
			return r, fmt.Errorf("bench: the run ended before the endpoint received %d batches: raise -n or lower --kill-at", opt.KillAt)
		}
	}
	if err := runJob(ctx, exe, job, inPath, out, nil); err != nil {
		return r, err
	}
	r.WallS = time.Since(start).Seconds()
	res, err := readProviderBatchResults(out, r.N)
	if err != nil {
		return r, err
	}
	r.OK, r.Failed, r.Cost, r.Rounds = res.ok, res.failed, res.cost, res.maxCalls
	if r.RealtimeCost > 0 {
		r.CostRatio = r.Cost / r.RealtimeCost
	}
	st, err := sim.stats(ctx)
	if err != nil {
		return r, err
	}
	r.Submissions, r.Lines, r.DuplicateSubmissions = int(st.Batches), int(st.Lines), int(st.DuplicateSubmissions)
	if opt.JSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
	} else {
		fmt.Fprintf(w, "provider-batch n=%d  wall %.1fs  ok %d  failed %d  cost $%.4f vs $%.4f in real time (ratio %.3f)  %d submissions  %d lines  %d rounds  kill at %d  duplicate submissions %d\n",
			r.N, r.WallS, r.OK, r.Failed, r.Cost, r.RealtimeCost, r.CostRatio, r.Submissions, r.Lines, r.Rounds, r.KillAt, r.DuplicateSubmissions)
	}
	return r, nil
}

// writeProviderBatchJob writes the scenario's job file, delivered in real
// time or through the batch endpoint, and returns its path.
func writeProviderBatchJob(dir, name, addr string, batch bool) (string, error) {
	delivery := "realtime"
	if batch {
		// Quick rounds: the simulated endpoint answers in a second.
		delivery = "{mode: batch, linger: 300ms, poll_every: 100ms}"
	}
	job := fmt.Sprintf(`name: provider-batch-%s
backend: "sim+http://%s/v1"
model: %s
task: "Read path: doc.txt and summarise item {id}."
tools:
  - name: read_file
    roots: [%q]
limits:
  max_turns: 4
delivery: %s
cache: off
output_schema: {type: object, properties: {summary: {type: string}}, required: [summary]}
`, name, addr, providerBatchModel, dir, delivery)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return path, nil
}

// runJob runs `batchagent run job` to the end; while it runs, kill (when
// set) is called every 20 ms until it reports that it killed the run,
// which is then no error.
func runJob(ctx context.Context, exe, job, in, out string, kill func(*exec.Cmd) bool) error {
	cmd := exec.CommandContext(ctx, exe, "run", job, "--inputs", in, "--out", out, "--quiet")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start the run: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if killed {
				return nil
			}
			if err != nil {
				return fmt.Errorf("bench: the run of %s: %w: %s", filepath.Base(job), err, tail(stderr.String()))
			}
			return nil
		case <-tick.C:
			if kill != nil && !killed && kill(cmd) {
				killed = true
			}
		}
	}
}

// readProviderBatchResults reads the results file out of n inputs: one
// line per input, each with its cost.
func readProviderBatchResults(out string, n int) (results, error) {
	res, err := readResults(out, n)
	if err == nil && res.costed != n {
		err = fmt.Errorf("bench: %s: %d of %d lines have no cost", out, n-res.costed, n)
	}
	return res, err
}

// batchSim is the HTTP simulator with its Batch API, served on a loopback
// port for the scenario's runs.
type batchSim struct {
	addr string
	srv  *simhttp.Server
	stop func()
}

// startBatchSim serves the simulator, its Batch API completing each batch
// after delay, on a free loopback port. Its model calls every tool on two
// turns, then answers: three model calls per agent.
func startBatchSim(ctx context.Context, delay time.Duration) (*batchSim, error) {
	srv, err := simhttp.New(simhttp.Config{
		Model:           sim.Config{ToolTurns: 2, Seed: 1},
		MaxSeqs:         256,
		MaxQueue:        -1,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 10 * time.Microsecond,
		Batch: true, BatchDelay: delay,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(sctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	return &batchSim{addr: ln.Addr().String(), srv: srv, stop: func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	}}, nil
}

// stats returns what the simulator's Batch API received.
func (s *batchSim) stats(context.Context) (simhttp.BatchStats, error) {
	return s.srv.BatchStats(), nil
}
