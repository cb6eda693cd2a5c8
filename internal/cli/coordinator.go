package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/progress"
	"github.com/batchagent/batchagent/queue"
)

// defaultWindow is --window's default: the inputs enqueued but without a
// result at most, so that a run of millions never fills Redis.
const defaultWindow = queue.DefaultWindow

// redisFlags are `batchagent run`'s flags for a run spread over workers.
type redisFlags struct {
	url    string // --redis: makes the process the coordinator; "" runs here
	runID  string // --run-id: the run's ID; "": derived from the job, inputs and output
	window int    // --window: inputs enqueued and not done at most
}

// conflictsWithRedis lists `run`'s flags that --redis cannot go with, and why.
var conflictsWithRedis = []struct{ flag, why string }{
	{"state", "the checkpoints are kept in Redis"},
	{"no-state", "the checkpoints are kept in Redis"},
	{"force", "a run's ID covers its job file, so a changed job is a new run"},
	{"ordered", "results are written in completion order"},
	{"backend", "the workers open the job file's backend: set backend: in the job file"},
	{"openai-batch", "OpenAI batch files run in one process"},
	{"config", "it goes with --openai-batch"},
	{"batch-state", "it goes with --openai-batch"},
	{"metrics-addr", "the workers run the agents"},
	{"trace-content", "the workers run the agents"},
}

// checkRedisFlags rejects flag combinations that contradict each other:
// --redis with a flag of a run in one process, and --run-id or --window
// without --redis. changed says whether a flag was given.
func checkRedisFlags(rf redisFlags, changed func(string) bool) error {
	if rf.url == "" {
		for _, name := range []string{"run-id", "window"} {
			if changed(name) {
				return fmt.Errorf("--%s goes with --redis, which is not given: add --redis URL or drop --%s", name, name)
			}
		}
		return nil
	}
	for _, c := range conflictsWithRedis {
		if changed(c.flag) {
			return fmt.Errorf("--redis and --%s contradict each other (%s): drop one", c.flag, c.why)
		}
	}
	if rf.window < 1 {
		return fmt.Errorf("--window %d: want at least 1", rf.window)
	}
	if rf.runID != "" && strings.ContainsAny(rf.runID, " \t\n:{}") {
		return fmt.Errorf("--run-id %q: want no spaces, colons or braces", rf.runID)
	}
	return nil
}

// runCoordinator runs the job file at path over the workers reading the
// Redis at rf.url (`batchagent run JOB --redis URL`): a queue.Coordinator
// whose results go into the output file.
func runCoordinator(ctx context.Context, path string, f runFlags, rf redisFlags, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return code
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fail(exitUsage, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("config: %w", err))
	}
	cj, err := config.Parse(data, path, filepath.Dir(path))
	if err != nil {
		return fail(exitUsage, err)
	}
	switch {
	case cj.Reduce != nil:
		return fail(exitUsage, fmt.Errorf("%s: a job with a reduce step does not run with --redis (the workers run the inputs only): run it without --redis", path))
	case cj.Def.Pack.MaxAgents > 0:
		return fail(exitUsage, fmt.Errorf("%s: a job with pack: does not run with --redis (workers run each input on its own): drop pack: or --redis", path))
	case cj.BatchDelivery(cj.Backend):
		return fail(exitUsage, fmt.Errorf("%s: a job delivered through the provider's batch API (delivery: batch, or mode=batch) does not run with --redis: one process submits every call, and workers would each keep their own batches; run it without --redis", path))
	case cj.MaxCost > 0 && !estimate.PriceOf(cj).Known:
		return fail(exitUsage, fmt.Errorf("%s: limits.max_cost is set but model %q has no known price: set pricing: {input: ..., output: ...} (dollars per million tokens) in the job file, or remove limits.max_cost", path, cj.Def.ModelName))
	}
	outPath := cj.Output
	if f.Out != "" {
		outPath = f.Out
	}
	if outPath == "" || outPath == "-" {
		return fail(exitUsage, errors.New("--redis needs an output file (--out FILE, or output: in the job file): it is what a restarted coordinator resumes from"))
	}
	if outPath, err = filepath.Abs(outPath); err != nil {
		return fail(exitUsage, err)
	}
	inPath := cj.Inputs
	if f.Inputs != "" {
		inPath = f.Inputs
	}
	if inPath == "" {
		return fail(exitUsage, fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", path))
	}
	if inPath, err = filepath.Abs(inPath); err != nil {
		return fail(exitUsage, err)
	}
	co, err := openCoordOutput(outPath, cj.Def.OutputSchema)
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := outfile.CheckFiles(co.files(f.Out != ""), jobrun.Reads(path, cj, inPath)); err != nil {
		return fail(exitUsage, err)
	}
	format, err := jobrun.InputFormatOf(inPath)
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := jobrun.CheckPlaceholders(path, cj.Def.Task, inPath); err != nil {
		return fail(exitUsage, err)
	}
	// One read of the inputs counts them and digests them for the run ID.
	in, err := os.Open(inPath)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("inputs: %w", err))
	}
	defer in.Close()
	price := estimate.PriceOf(cj) // before the count named estimate hides the package
	jobrun.WarnUnpriced(cj, price, f.Logger)
	digest := sha256.New()
	estimate, err := format.Count(io.TeeReader(in, digest))
	if err == nil {
		_, err = io.Copy(digest, in) // what count left unread
	}
	if err != nil {
		return fail(exitUsage, fmt.Errorf("inputs: %w", err))
	}
	id := rf.runID
	if id == "" {
		id = runIDOf(abs, config.RunIdentity(data), inPath, hex.EncodeToString(digest.Sum(nil)), outPath)
	}
	lock, err := outfile.TakeLock(outPath, "output", outfile.Holder(path, outPath))
	if err != nil {
		return fail(exitUsage, err)
	}
	defer lock.Close()

	q, err := queue.Open(ctx, rf.url, queue.Options{Logger: f.Logger})
	if err != nil {
		return fail(exitFailed, err)
	}
	defer q.Close()
	name := jobrun.Name(path, cj)
	written := &queue.IndexSet{}
	restored := 0                              // the results in the output before this run
	var w *bufio.Writer                        // the output's, once open
	var snap atomic.Pointer[progress.Counters] // the progress line's, set every 2 s by the coordinator
	c, err := queue.NewCoordinator(queue.CoordinatorConfig{
		Client: q, Run: queue.Run{ID: id, Job: data, JobPath: abs, NoCache: f.NoCache}, Window: rf.window,
		OutageBudget: cj.Def.OutageBudget, Written: written,
		// The inputs are read again from the first, from the file counted.
		Inputs: func() (batchagent.Inputs, error) {
			if _, err := in.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("inputs: %w", err)
			}
			return format.Decode(in, filepath.Base(inPath)), nil
		},
		Sink: func(batch []queue.Collected) error {
			for _, r := range batch {
				line := r.Line
				if r.Decoded && price.Known {
					line = outfile.AppendCost(line, price.Price.Cost(r.Usage))
				}
				w.Write(line)
				w.WriteByte('\n')
			}
			return w.Flush()
		},
		Progress: func(s queue.CoordinatorStats) {
			if !f.quiet {
				cs := coordCounters(ctx, q, name, s, restored, estimate, price)
				snap.Store(&cs)
			}
		},
		Warn: func(msg string) { fmt.Fprintln(stderr, "batchagent run:", msg) },
	})
	if err != nil {
		return fail(exitFailed, err)
	}
	st, existed, err := c.Register(ctx)
	if err != nil {
		return fail(exitFailed, err)
	}
	if existed && !bytes.Equal(config.RunIdentity(st.Job), config.RunIdentity(data)) {
		return fail(exitUsage, fmt.Errorf("run %s exists in Redis with another job file (%s): give another --run-id", id, st.JobPath))
	}

	// --retry-failed: the failed results recorded are taken back and
	// their inputs enqueued again, after their lines left the output (a
	// coordinator killed between the two finds the failures in Redis
	// again, or writes their lines again without the flag).
	var retry map[int]string
	if f.RetryFailed && existed {
		if retry, err = c.Failed(ctx); err != nil {
			return fail(exitFailed, err)
		}
	}
	out, err := outfile.OpenRun(co.lines, existed, retry, func(i int) { written.Add(i) })
	if err != nil {
		return fail(exitFailed, fmt.Errorf("output %s: %w", outPath, err))
	}
	defer out.Close()
	w = bufio.NewWriterSize(out, 64<<10)
	retried, err := c.Retry(ctx, retry)
	if err != nil {
		return fail(exitFailed, err)
	}
	if !f.quiet {
		verb := "starting"
		if existed {
			verb = fmt.Sprintf("resuming (%d results in the output, %d inputs enqueued before)", written.Len(), st.Enqueued)
		}
		if f.RetryFailed && existed {
			verb += fmt.Sprintf("; %d failed inputs enqueued again (--retry-failed)", retried)
		}
		fmt.Fprintf(stderr, "batchagent: %s: run %s on %s: %s; start workers with: batchagent worker --redis URL\n", name, id, queue.RedactURL(rf.url), verb)
	}

	restored = written.Len()
	stopProgress := func() {}
	if !f.quiet {
		cs := coordCounters(ctx, q, name, c.Stats(), restored, estimate, price)
		snap.Store(&cs)
		prog := progress.Start(stderr, progress.Config{LogEvery: coordLogEvery, Source: func() progress.Counters { return *snap.Load() }})
		stopProgress = prog.Stop
	}
	begin := time.Now()
	sigCtx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	runCtx, capStop := sigCtx, func() (bool, queue.SpendState) { return false, queue.SpendState{} }
	if cj.MaxCost > 0 {
		ledger := q.SpendLedger(id)
		// A run stopped at the cap goes on under this start's cap, its
		// spend kept: the workers' reservations are held to it.
		if err := ledger.Reopen(ctx, cj.MaxCost); err != nil {
			return fail(exitFailed, err)
		}
		runCtx, capStop = ledger.Watch(sigCtx)
	}
	runErr := c.Run(runCtx)
	capped, capState := capStop()
	interrupted := sigCtx.Err() != nil
	if (interrupted || capped) && errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	stopProgress()
	if err := w.Flush(); err != nil && runErr == nil {
		runErr = err
	}
	if err := out.Sync(); err != nil && runErr == nil {
		runErr = err
	}
	if err := co.finish(c.Stats().Total); err != nil && runErr == nil {
		runErr = err
	}
	sum := c.Stats()
	if !f.quiet {
		writeCoordSummary(stderr, name, time.Since(begin), sum, outPath, strings.TrimPrefix(price.Summary(sum.Usage), "cost: "))
	}
	switch {
	case runErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", runErr)
		return exitFailed
	case capped:
		total := sum.Total
		if total < 0 {
			total = estimate
		}
		pending := max(total-sum.Written, 0)
		fmt.Fprintf(stderr, "batchagent run: stopped at the spend cap: $%.4f spent of $%.4f; %d inputs pending — run again with a higher limits.max_cost to run them\n",
			capState.Spent, cj.MaxCost, pending)
		return exitFailed
	case interrupted:
		if !f.quiet {
			fmt.Fprintf(stderr, "  run %s goes on on the workers; run the same command again to collect its results\n", id)
		}
		return exitInterrupted
	case sum.Failed > 0:
		return exitFailed
	}
	return exitOK
}
