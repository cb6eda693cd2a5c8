package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/sink"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/queue"
)

// defaultWindow is --window's default: the inputs enqueued but without a
// result at most, so that a run of millions never fills Redis.
const defaultWindow = 1000

// coordEvery is how often the coordinator heartbeats and redraws its
// progress.
const coordEvery = 2 * time.Second

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

// coordinator is `batchagent run --redis`: it enqueues a run's inputs
// and writes their results, recorded by the workers, into the output.
type coordinator struct {
	q      *queue.Client
	run    string // the run's ID
	name   string // the job's name, for messages
	window int
	inputs batchagent.Inputs
	start  int // inputs enqueued already (a resumed run)
	// skip are the inputs whose lines the output held when the run was
	// enqueued again after Redis lost it: each is enqueued as a
	// placeholder (null), which workers drop, so that the run's indexes
	// stay contiguous without running them again. Nil otherwise.
	skip *indexSet
	// outage bounds how long a Redis operation of the coordinator is
	// tried again while Redis cannot be reached: the job's outage budget.
	outage  time.Duration
	warn    io.Writer // warnings, one per outage spell
	outPath string
	out     *bufio.Writer

	seen     atomic.Int64 // distinct results read from the run this session
	enqueued atomic.Int64
	total    atomic.Int64 // the inputs, once all are enqueued; -1 until then
	// progress tells the enqueuer that results came (capacity 1: one
	// pending signal is enough).
	progress chan struct{}
	// price is what the job's tokens cost: each line collected gets its
	// cost, and the progress line and the summary the total, when it is
	// known.
	price estimate.Price
}

// runCoordinator runs the job file at path over the workers reading the
// Redis at rf.url: `batchagent run JOB --redis URL`.
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
	}
	outPath := cj.Output
	if f.out != "" {
		outPath = f.out
	}
	if outPath == "" || outPath == "-" {
		return fail(exitUsage, errors.New("--redis needs an output file (--out FILE, or output: in the job file): it is what a restarted coordinator resumes from"))
	}
	if outPath, err = filepath.Abs(outPath); err != nil {
		return fail(exitUsage, err)
	}
	inPath := cj.Inputs
	if f.inputs != "" {
		inPath = f.inputs
	}
	if inPath == "" {
		return fail(exitUsage, fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", path))
	}
	if inPath, err = filepath.Abs(inPath); err != nil {
		return fail(exitUsage, err)
	}
	if err := checkRunFiles([]runFile{outputFile(outPath, f.out != "")}, jobReads(path, cj, inPath)); err != nil {
		return fail(exitUsage, err)
	}
	format, err := inputFormatOf(inPath)
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := checkPlaceholders(path, cj.Def.Task, inPath); err != nil {
		return fail(exitUsage, err)
	}
	// One read of the inputs counts them and digests them for the run ID.
	in, err := os.Open(inPath)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("inputs: %w", err))
	}
	defer in.Close()
	price := estimate.PriceOf(cj) // before the count named estimate hides the package
	digest := sha256.New()
	estimate, err := format.count(io.TeeReader(in, digest))
	if err == nil {
		_, err = io.Copy(digest, in) // what count left unread
	}
	if err != nil {
		return fail(exitUsage, fmt.Errorf("inputs: %w", err))
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fail(exitUsage, fmt.Errorf("inputs: %w", err))
	}
	id := rf.runID
	if id == "" {
		id = runIDOf(abs, data, inPath, hex.EncodeToString(digest.Sum(nil)), outPath)
	}
	lock, err := lockFile(outPath, "output", lockHolder(path, outPath))
	if err != nil {
		return fail(exitUsage, err)
	}
	defer lock.Close()

	q, err := queue.Open(ctx, rf.url, queue.Options{Logger: f.logger})
	if err != nil {
		return fail(exitFailed, err)
	}
	defer q.Close()
	st, existed, err := q.CreateRun(ctx, queue.Run{ID: id, Job: data, JobPath: abs, Created: time.Now()})
	if err != nil {
		return fail(exitFailed, err)
	}
	if existed && !bytes.Equal(st.Job, data) {
		return fail(exitUsage, fmt.Errorf("run %s exists in Redis with another job file (%s): give another --run-id", id, st.JobPath))
	}

	// --retry-failed: the failed results recorded are taken back and
	// their inputs enqueued again, after their lines left the output (a
	// coordinator killed between the two finds the failures in Redis
	// again, or writes their lines again without the flag).
	var retry map[int]string
	if f.retryFailed && existed {
		if retry, err = failedResults(ctx, q, id); err != nil {
			return fail(exitFailed, err)
		}
	}
	out, written, err := openRunOutput(outPath, existed, retry)
	if err != nil {
		return fail(exitFailed, fmt.Errorf("output %s: %w", outPath, err))
	}
	defer out.Close()
	retried := 0
	if len(retry) > 0 {
		if retried, err = retryInputs(ctx, q, id, format, inPath, retry); err != nil {
			return fail(exitFailed, err)
		}
	}

	c := &coordinator{
		q: q, run: id, name: jobName(path, cj), window: rf.window,
		inputs: format.decode(in, filepath.Base(inPath)), start: st.Enqueued,
		outPath: outPath, out: bufio.NewWriterSize(out, 64<<10),
		progress: make(chan struct{}, 1),
		price:    price,
		outage:   outageBudget(cj.Def),
		warn:     stderr,
	}
	c.total.Store(-1)
	c.enqueued.Store(int64(st.Enqueued))
	if !f.quiet {
		verb := "starting"
		if existed {
			verb = fmt.Sprintf("resuming (%d results in the output, %d inputs enqueued before)", written.len(), st.Enqueued)
		}
		if f.retryFailed && existed {
			verb += fmt.Sprintf("; %d failed inputs enqueued again (--retry-failed)", retried)
		}
		fmt.Fprintf(stderr, "batchagent: %s: run %s on %s: %s; start workers with: batchagent worker --redis URL\n", c.name, id, queue.RedactURL(rf.url), verb)
	}
	for {
		code, lost := c.coordinate(ctx, written, estimate, f.quiet, stderr, out)
		if !lost {
			return code
		}
		// Redis lost the run (restarted without its data, flushed,
		// evicted): the inputs and the output are here, so the run is
		// registered again and the inputs without a line enqueued again.
		fmt.Fprintf(stderr, "batchagent run: run %s is gone from Redis (restarted without its data, flushed or evicted): registering it again and enqueuing the inputs without a line in the output (%d have one)\n", id, written.len())
		if err := c.reenqueue(ctx, in, format, filepath.Base(inPath), queue.Run{ID: id, Job: data, JobPath: abs}, written); err != nil {
			return fail(exitFailed, fmt.Errorf("run %s is gone from Redis and could not be registered again: %w", id, err))
		}
	}
}

// outageBudget is how long the coordinator waits out a Redis outage: the
// job's outage budget, or job.DefaultOutageBudget.
func outageBudget(d batchagent.Def) time.Duration {
	if d.OutageBudget > 0 {
		return d.OutageBudget
	}
	return batchagent.DefaultOutageBudget
}

// reenqueue registers run r again after Redis lost it and starts its
// inputs over from the first: the ones written already (a snapshot of
// written) are enqueued as placeholders, the others as tasks.
func (c *coordinator) reenqueue(ctx context.Context, in *os.File, format inputFormat, name string, r queue.Run, written *indexSet) error {
	err := c.redis(ctx, "register the run again", func() error {
		r.Created = time.Now()
		_, _, err := c.q.CreateRun(ctx, r)
		return err
	})
	if err != nil {
		return err
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("inputs: %w", err)
	}
	c.inputs, c.start, c.skip = format.decode(in, name), 0, written.clone()
	c.enqueued.Store(0)
	c.total.Store(-1)
	return nil
}

// redis runs op, a Redis operation of the coordinator, and runs it again
// while it fails (Redis down, restarting, loading its data), for up to
// the outage budget: a blip stops nothing. It returns op's error when it
// wraps queue.ErrNoRun (the run is gone: trying again cannot help), when
// ctx ends, or once the budget is spent. what names the operation in the
// warning written once per outage.
func (c *coordinator) redis(ctx context.Context, what string, op func() error) error {
	var since time.Time
	for {
		err := op()
		if err == nil || errors.Is(err, queue.ErrNoRun) || ctx.Err() != nil {
			return err
		}
		if since.IsZero() {
			since = time.Now()
			if c.warn != nil {
				fmt.Fprintf(c.warn, "batchagent run: warning: %s: %v: trying again for up to %v\n", what, err, c.outage)
			}
		} else if time.Since(since) >= c.outage {
			return fmt.Errorf("%s: Redis unavailable for %v (the outage budget): %w", what, c.outage.Round(time.Second), err)
		}
		pause(ctx, 500*time.Millisecond)
	}
}

// runIDOf derives a run's ID from what makes it this run: the job file's
// absolute path and content, the inputs' path and content (their digest)
// and the output's path. Running the same command again gives the same
// ID, and so resumes; after the job or the inputs changed it is another
// run, which starts its output afresh, so no result of the old inputs is
// kept or written.
func runIDOf(jobPath string, job []byte, inPath, inDigest, outPath string) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(jobPath), job, []byte(inPath), []byte(inDigest), []byte(outPath)} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// openRunOutput opens the output of a run. A new run truncates it. A
// resumed one keeps its complete lines, drops a partial last line (the
// write a killed coordinator left half done) and everything after it,
// and the lines of the indexes in drop (failed results run again), and
// returns the indexes the lines kept hold.
func openRunOutput(path string, resume bool, drop map[int]string) (*os.File, *indexSet, error) {
	written := &indexSet{}
	if !resume {
		f, err := os.Create(path)
		return f, written, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	// Lines are dropped from the middle by writing the kept ones to a new
	// file that replaces the output (its lock is a file beside it).
	var rewrite *os.File
	if len(drop) > 0 {
		if rewrite, err = os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".retry-*"); err != nil {
			f.Close()
			return nil, nil, err
		}
		defer os.Remove(rewrite.Name()) // renamed over path unless something failed
		defer rewrite.Close()
	}
	w := bufio.NewWriterSize(rewrite, 64<<10)
	r := bufio.NewReaderSize(f, 64<<10)
	var keep int64
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF: a line without its newline is partial
		}
		var l struct {
			Index *int `json:"index"`
		}
		if json.Unmarshal(line, &l) != nil || l.Index == nil || *l.Index < 0 {
			break
		}
		if _, ok := drop[*l.Index]; ok {
			continue
		}
		written.add(*l.Index)
		keep += int64(len(line))
		if rewrite != nil {
			w.Write(line)
		}
	}
	if rewrite != nil {
		f.Close()
		err := w.Flush()
		if err == nil {
			err = rewrite.Sync()
		}
		if err == nil {
			err = os.Rename(rewrite.Name(), path)
		}
		if err != nil {
			return nil, nil, err
		}
		if f, err = os.OpenFile(path, os.O_RDWR, 0o644); err != nil {
			return nil, nil, err
		}
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, written, nil
}

// failedResults returns the failed results recorded in run, by input
// index, each with its entry in the run's results stream: those that
// --retry-failed runs again. Inputs that could not be decoded (kind input)
// would fail again and are left alone.
func failedResults(ctx context.Context, q *queue.Client, run string) (map[int]string, error) {
	failed := map[int]string{}
	cursor := "0"
	for {
		recs, err := q.Results(ctx, run, cursor, 1024, 0)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			return failed, nil
		}
		for _, rec := range recs {
			cursor = rec.Cursor
			var l struct {
				Error *struct {
					Kind string `json:"kind"`
				} `json:"error"`
			}
			if json.Unmarshal(rec.Line, &l) == nil && l.Error != nil && l.Error.Kind != string(batchagent.KindInput) {
				failed[rec.Index] = rec.Cursor
			}
		}
	}
}

// retryInputs takes back the failed results of run in failed (index →
// results-stream entry) and enqueues their inputs, read again from the
// inputs file at inPath, once more; it returns how many it enqueued.
func retryInputs(ctx context.Context, q *queue.Client, run string, format inputFormat, inPath string, failed map[int]string) (int, error) {
	in, err := os.Open(inPath)
	if err != nil {
		return 0, fmt.Errorf("inputs: %w", err)
	}
	defer in.Close()
	n, i, last := 0, 0, slices.Max(slices.Collect(maps.Keys(failed)))
	for input, ierr := range format.decode(in, filepath.Base(inPath)) {
		entry, ok := failed[i]
		i++
		if !ok || ierr != nil {
			if i > last {
				break
			}
			continue
		}
		b, err := json.Marshal(input)
		if err != nil {
			return n, fmt.Errorf("input %d: %w", i-1, err)
		}
		again, err := q.Retry(ctx, run, i-1, entry, b)
		if err != nil {
			return n, err
		}
		if again {
			n++
		}
		if i > last {
			break
		}
	}
	return n, nil
}

// coordinate enqueues the inputs and writes the results until every input
// has its line in the output, or ctx ends or a signal comes. lost reports
// that Redis lost the run (code is then meaningless): the caller
// registers it again and calls coordinate once more.
func (c *coordinator) coordinate(ctx context.Context, written *indexSet, estimate int, quiet bool, stderr io.Writer, file *os.File) (code int, lost bool) {
	begin := time.Now()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enqErr := make(chan error, 1) // the enqueuer's one result
	var wg sync.WaitGroup
	wg.Go(func() { enqErr <- c.enqueue(ctx) })
	defer wg.Wait()

	var sum runSummary
	var seen indexSet
	prog := newCoordProgress(stderr, quiet)
	defer prog.stop()
	cursor := "0"
	var lastBeat time.Time
	var runErr error
	for {
		if total := int(c.total.Load()); total >= 0 && written.len() >= total && written.countBelow(total) == total {
			break
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case err := <-enqErr:
			if errors.Is(err, queue.ErrNoRun) {
				lost = true
			} else if err != nil && ctx.Err() == nil {
				runErr = err
			}
		default:
		}
		if lost {
			break
		}
		if runErr != nil {
			break
		}
		if time.Since(lastBeat) >= coordEvery {
			lastBeat = time.Now()
			if err := c.q.CoordinatorBeat(ctx, c.run); errors.Is(err, queue.ErrNoRun) {
				// Deleted, flushed, evicted or a Redis restarted without
				// its data: its tasks and results are gone with it, and
				// nothing would ever finish it.
				lost = true
				break
			} else if err != nil && ctx.Err() == nil {
				fmt.Fprintln(stderr, "batchagent run: warning: heartbeat:", err)
			}
			if !quiet {
				prog.draw(c.progressLine(ctx, written.len(), estimate, sum.usage))
			}
		}
		recs, err := c.q.Results(ctx, c.run, cursor, 512, time.Second)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintln(stderr, "batchagent run: warning: reading results:", err)
			pause(ctx, time.Second)
			continue
		}
		for _, rec := range recs {
			cursor = rec.Cursor
			if rec.Index < 0 || !seen.add(rec.Index) {
				continue
			}
			c.seen.Add(1)
			if !written.add(rec.Index) {
				continue
			}
			line := bytes.TrimRight(rec.Line, "\n")
			if u, ok := sum.add(line); ok && c.price.Known {
				line = sink.AppendCost(line, c.price.Price.Cost(u))
			}
			c.out.Write(line)
			c.out.WriteByte('\n')
		}
		if len(recs) > 0 {
			if err := c.out.Flush(); err != nil {
				runErr = err
				break
			}
			select {
			case c.progress <- struct{}{}:
			default:
			}
		}
	}
	interrupted := ctx.Err() != nil
	cancel()
	wg.Wait()
	prog.stop()
	if err := c.out.Flush(); err != nil && runErr == nil {
		runErr = err
	}
	if err := file.Sync(); err != nil && runErr == nil {
		runErr = err
	}
	if lost && runErr == nil && !interrupted {
		return 0, true
	}
	if !quiet {
		sum.write(stderr, c.name, time.Since(begin), written.len(), c.outPath)
		fmt.Fprintf(stderr, "  %s\n", c.price.Summary(sum.usage))
	}
	switch {
	case runErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", runErr)
		return exitFailed, false
	case interrupted:
		if !quiet {
			fmt.Fprintf(stderr, "  run %s goes on on the workers; run the same command again to collect its results\n", c.run)
		}
		return exitInterrupted, false
	case sum.failed > 0:
		return exitFailed, false
	}
	return exitOK, false
}

// enqueue adds the inputs after those enqueued before to the run's stream,
// keeping at most c.window of them without a result, then sets the run's
// total. An input that cannot be decoded is a result: its failure is
// recorded, and its place in the stream is held by a placeholder (JSON
// null) that the workers acknowledge without running; so is an input of
// c.skip, whose line the output has. A Redis that cannot be reached is
// waited out (c.redis); an error wrapping queue.ErrNoRun says the run is
// gone.
func (c *coordinator) enqueue(ctx context.Context) error {
	i, skipped := 0, 0
	for in, ierr := range c.inputs {
		if i < c.start {
			i++
			continue
		}
		for i-skipped-int(c.seen.Load()) >= c.window {
			select {
			case <-c.progress:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		raw := json.RawMessage("null")
		switch {
		case c.skip != nil && c.skip.has(i):
			skipped++
		case ierr != nil:
			line, err := json.Marshal(inputFailure(c.run, i, ierr))
			if err != nil {
				return fmt.Errorf("input %d: %w", i, err)
			}
			err = c.redis(ctx, fmt.Sprintf("record input %d's failure", i), func() error {
				_, err := c.q.Record(ctx, c.run, i, line)
				return err
			})
			if err != nil {
				return err
			}
		default:
			b, err := json.Marshal(in)
			if err != nil {
				return fmt.Errorf("input %d: %w", i, err)
			}
			raw = b
		}
		if err := c.redis(ctx, fmt.Sprintf("enqueue input %d", i), func() error { return c.enqueueOne(ctx, i, raw) }); err != nil {
			return err
		}
		i++
		c.enqueued.Store(int64(i))
	}
	if err := c.redis(ctx, "set the run's total", func() error { return c.q.SetTotal(ctx, c.run, i) }); err != nil {
		return err
	}
	c.total.Store(int64(i))
	return nil
}

// enqueueOne enqueues input i. A refusal because i is enqueued already
// (the reply to an earlier try was lost with the connection) is success.
func (c *coordinator) enqueueOne(ctx context.Context, i int, raw json.RawMessage) error {
	err := c.q.Enqueue(ctx, c.run, i, raw)
	if err == nil || errors.Is(err, queue.ErrNoRun) {
		return err
	}
	if st, serr := c.q.RunStatus(ctx, c.run); serr == nil && st.Enqueued > i {
		return nil
	}
	return err
}

// progressLine says how far the run is, over all workers; u is the usage
// of the lines written this time, priced when the price is known.
func (c *coordinator) progressLine(ctx context.Context, done, estimate int, u llm.Usage) string {
	total := int(c.total.Load())
	if total < 0 {
		total = estimate
	}
	alive, held := 0, 0
	if ws, err := c.q.Workers(ctx); err == nil {
		for _, w := range ws {
			if w.Alive {
				alive++
				held += w.Held
			}
		}
	}
	line := fmt.Sprintf("batchagent: %s: done %d/%d · enqueued %d · workers %d alive, %d agents held", c.name, done, total, c.enqueued.Load(), alive, held)
	if c.price.Known {
		line += fmt.Sprintf(" · $%.4f", c.price.Price.Cost(u)) // the lines written this time
	}
	return line
}

// coordProgress draws the progress line: redrawn in place on a terminal,
// else a line every 10 seconds.
type coordProgress struct {
	w     io.Writer
	tty   bool
	drawn bool
	last  time.Time
}

func newCoordProgress(w io.Writer, quiet bool) *coordProgress {
	p := &coordProgress{w: w}
	if f, ok := baseWriter(w).(*os.File); ok && !quiet {
		p.tty = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *coordProgress) draw(line string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.drawn = true
		return
	}
	if time.Since(p.last) >= 10*time.Second {
		p.last = time.Now()
		fmt.Fprintln(p.w, line)
	}
}

func (p *coordProgress) stop() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// runSummary counts the result lines a coordinator wrote.
type runSummary struct {
	ok, failed                 int
	byKind                     map[string]int
	modelCalls, turns, tools   int64
	promptTokens, completionTk int64
	// usage sums the lines' tokens, cached ones included, for the cost.
	usage llm.Usage
}

// add counts one result line and returns its usage; a line that does not
// decode counts as nothing and has none.
func (s *runSummary) add(line []byte) (u llm.Usage, ok bool) {
	var l struct {
		Error *struct {
			Kind string `json:"kind"`
		} `json:"error"`
		ModelCalls int64     `json:"model_calls"`
		Turns      int64     `json:"turns"`
		ToolCalls  int64     `json:"tool_calls"`
		Usage      llm.Usage `json:"usage"`
	}
	if json.Unmarshal(line, &l) != nil {
		return llm.Usage{}, false
	}
	if l.Error != nil {
		s.failed++
		if s.byKind == nil {
			s.byKind = map[string]int{}
		}
		s.byKind[l.Error.Kind]++
	} else {
		s.ok++
	}
	s.modelCalls += l.ModelCalls
	s.turns += l.Turns
	s.tools += l.ToolCalls
	s.promptTokens += l.Usage.PromptTokens
	s.completionTk += l.Usage.CompletionTokens
	s.usage = s.usage.Add(l.Usage)
	return l.Usage, true
}

// write prints the summary of the results written this time.
func (s *runSummary) write(w io.Writer, name string, wall time.Duration, inOutput int, outPath string) {
	n := s.ok + s.failed
	fmt.Fprintf(w, "batchagent: %s: %d results collected in %s (%.1f agents/s); %d in the output\n", name, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), inOutput)
	fmt.Fprintf(w, "  ok %d · failed %d", s.ok, s.failed)
	if len(s.byKind) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.byKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.byKind[k]))
		}
		fmt.Fprintf(w, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  model calls %d · turns %d · tool calls %d · tokens: prompt %s · completion %s\n", s.modelCalls, s.turns, s.tools, count(s.promptTokens), count(s.completionTk))
	fmt.Fprintf(w, "  results: %s\n", outPath)
}
