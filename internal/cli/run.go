package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/sink"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// runFlags are the flags of `batchagent run`.
type runFlags struct {
	inputs, out, backend, state string
	ordered, quiet              bool
	force, retryFailed, noState bool
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: batchagent run JOB.yaml [flags]\n\nRuns one agent per input and writes one JSON result per line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var f runFlags
	fs.StringVar(&f.inputs, "inputs", "", "input file, .jsonl (one JSON object per line) or .csv (header row); overrides the job's inputs")
	fs.StringVar(&f.out, "out", "", "output file for JSONL results (default: the job's output, else stdout)")
	fs.StringVar(&f.backend, "backend", "", "backend URL, e.g. sim://?latency=60ms; overrides the job's backend")
	fs.BoolVar(&f.ordered, "ordered", false, "write results in input order (buffers results that finish early)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress or summary on stderr")
	fs.StringVar(&f.state, "state", "", "checkpoint store (SQLite); default OUT.state.db when --out is a file. Re-running resumes: finished inputs are kept, unfinished agents continue")
	fs.BoolVar(&f.noState, "no-state", false, "no checkpoint store")
	fs.BoolVar(&f.force, "force", false, "resume even though the job changed since the state was written")
	fs.BoolVar(&f.retryFailed, "retry-failed", false, "on resume, run the inputs that failed again")
	pos, err := parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "batchagent run: want exactly one job file")
		fs.Usage()
		return exitUsage
	}
	r, err := prepare(ctx, pos[0], f, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	defer r.close()
	return r.run(ctx, f.quiet, stderr)
}

// runner is a prepared `batchagent run`: engine, inputs and output.
type runner struct {
	name    string
	engine  *batchagent.Engine
	inputs  batchagent.Inputs
	total   int // inputs expected (lines of the input file), 0 if unknown
	out     *sink.JSONL
	outPath string
	closers []io.Closer
	tools   *builtTools // closed with the runner

	statePath    string // the checkpoint store, or ""
	resumedLines int    // result lines found in the output on resume

	job       batchagent.Job     // as built, for the reduce step
	reduce    *batchagent.Reduce // nil: no reduce step
	reduceOut string             // where the reduce output goes; "" for stdout
	stdout    io.Writer
}

// prepare loads the job file and opens everything the run needs. Every
// error it returns is a usage error (exit status 2).
func prepare(ctx context.Context, path string, f runFlags, stdout io.Writer) (*runner, error) {
	cj, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	r := &runner{name: cj.Name}
	if r.name == "" {
		r.name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	ok := false
	defer func() {
		if !ok {
			r.close()
		}
	}()
	backend := cj.Backend
	if f.backend != "" {
		backend = f.backend
	}
	model, err := openBackend(ctx, backend, cj.Model, cj.APIKeyEnv, environ)
	if err != nil {
		return nil, err
	}
	tools, err := buildTools(ctx, cj)
	if err != nil {
		return nil, err
	}
	r.tools = tools
	j := batchagent.Job{
		ID:            r.name,
		Model:         model,
		ModelName:     cj.Model,
		System:        cj.System,
		Task:          cj.Task,
		Tools:         tools.tools,
		ToolPool:      tool.PoolConfig{Policies: tools.policies},
		OutputSchema:  cj.OutputSchema.JSON,
		MaxTurns:      cj.Limits.MaxTurns,
		MaxInflight:   cj.Limits.MaxInflight,
		MaxActive:     cj.Limits.MaxActive,
		Timeout:       time.Duration(cj.Limits.Timeout),
		FixedInflight: cj.Limits.FixedInflight,
		RateLimit:     batchagent.RateLimit{RPM: cj.Limits.RPM, TPM: cj.Limits.TPM},
		Backpressure:  batchagent.Backpressure{MaxQueued: max(cj.Limits.MaxQueued, 0), Disabled: cj.Limits.MaxQueued < 0},
		WarmPrefix:    cj.WarmPrefix,
	}
	if _, hosted := model.(llm.Capable); hosted || cj.Limits.TPM > 0 {
		// Token pacing (configured, or learnt from the backend's headers)
		// needs real token counts.
		counter, err := tokens.New(cj.Model)
		if err != nil {
			return nil, err
		}
		j.RateLimit.CountTokens = counter.Count
	}
	if cj.Limits.MaxRetries != nil {
		j.MaxRetries = *cj.Limits.MaxRetries
		if j.MaxRetries == 0 {
			j.MaxRetries = -1 // an explicit 0 in the file means no retries
		}
	}
	r.outPath = cj.Output
	if f.out != "" {
		r.outPath = f.out
	}
	if r.outPath == "-" {
		r.outPath = ""
	}
	statePath := f.state
	if statePath == "" && r.outPath != "" && !f.noState {
		statePath = r.outPath + ".state.db"
	}
	resumed := false
	var store *checkpoint.Store
	if statePath != "" {
		store, err = checkpoint.Open(statePath, checkpoint.Config{})
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		r.closers = append(r.closers, store)
		fp := j.Fingerprint()
		fp["backend"] = checkpoint.Digest([]byte(backend)) // its query may hold a key
		if resumed, err = store.Begin(ctx, j.ID, fp, f.force); err != nil {
			return nil, fmt.Errorf("%s: %w", statePath, err)
		}
		j.Checkpoint, j.RetryFailed = store, f.retryFailed
		r.statePath = statePath
	}
	if r.engine, err = batchagent.New(j); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.job, r.stdout = j, stdout
	if red := cj.Reduce; red != nil {
		r.reduce = &batchagent.Reduce{Task: red.Task, System: red.System, OutputSchema: red.OutputSchema.JSON,
			GroupSize: red.GroupSize, MaxBytes: red.MaxBytes}
		r.reduceOut = red.Output
		if r.reduceOut == "" && r.outPath != "" {
			r.reduceOut = strings.TrimSuffix(r.outPath, filepath.Ext(r.outPath)) + ".reduce.json"
		}
	}

	inPath := cj.Inputs
	if f.inputs != "" {
		inPath = f.inputs
	}
	if inPath == "" {
		return nil, fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", path)
	}
	if r.inputs, r.total, err = r.openInputs(inPath); err != nil {
		return nil, err
	}
	if store != nil && r.total > 0 {
		// For `batchagent status`: inputs without a state are pending.
		if err := store.SetInputs(ctx, j.ID, r.total); err != nil {
			return nil, fmt.Errorf("%s: %w", statePath, err)
		}
	}

	var (
		w       io.Writer = stdout
		written map[int]bool
	)
	if r.outPath != "" {
		of, idx, err := openOutput(r.outPath, resumed)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		r.closers = append(r.closers, of)
		w, written = of, idx
	}
	r.out = sink.NewJSONL(w, f.ordered)
	r.out.Skip(written)
	r.resumedLines = len(written)
	ok = true
	return r, nil
}

// openOutput opens the results file. A fresh run truncates it. A resumed
// run keeps the complete lines already there (a line torn by a kill is cut
// off) and appends, returning the indexes those lines hold, so that every
// input ends with exactly one line.
func openOutput(path string, resumed bool) (*os.File, map[int]bool, error) {
	if !resumed {
		f, err := os.Create(path)
		return f, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	keep := bytes.LastIndexByte(data, '\n') + 1
	written := map[int]bool{}
	for line := range bytes.SplitSeq(data[:keep], []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v struct {
			Index *int `json:"index"`
		}
		if json.Unmarshal(line, &v) != nil || v.Index == nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: a line is not a result; remove the file or pick another --out", path)
		}
		written[*v.Index] = true
	}
	if err := f.Truncate(int64(keep)); err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(int64(keep), io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, written, nil
}

// openInputs opens an input file, choosing the format by its extension,
// and counts its lines for the progress estimate.
func (r *runner) openInputs(path string) (batchagent.Inputs, int, error) {
	var decode func(io.Reader, string) batchagent.Inputs
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		decode = batchagent.JSONL
	case ".csv":
		decode = batchagent.CSV
	default:
		return nil, 0, fmt.Errorf("inputs %s: unknown format: want a .jsonl or .csv file", path)
	}
	total, err := countLines(path)
	if err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		total = max(total-1, 0) // header row
	}
	in, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	r.closers = append(r.closers, in)
	return decode(in, filepath.Base(path)), total, nil
}

func (r *runner) close() {
	for _, c := range r.closers {
		c.Close()
	}
	r.closers = nil
	if r.tools != nil {
		r.tools.close()
	}
}

// run streams results to the output and reports progress and a summary.
func (r *runner) run(ctx context.Context, quiet bool, stderr io.Writer) int {
	start := time.Now()
	var rep *reporter
	if !quiet {
		rep = startReporter(r.engine, r.out, r.total, stderr)
	}
	var (
		notWritten int
		writeErr   error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var interrupted atomic.Bool
	stopSignals := r.handleSignals(cancel, &interrupted, stderr)
	var outputs []json.RawMessage // for the reduce step
	for res := range r.engine.Stream(runCtx, r.inputs) {
		if r.reduce != nil && res.Err == nil {
			outputs = append(outputs, res.Output)
		}
		if (interrupted.Load() || ctx.Err() != nil) && batchagent.KindOf(res.Err) == batchagent.KindCanceled {
			notWritten++ // stopped mid-flight: not a result, resume reruns it
			continue
		}
		if err := r.out.Write(res); err != nil && writeErr == nil {
			writeErr = err
			cancel()
		}
	}
	if err := r.out.Close(); err != nil && writeErr == nil {
		writeErr = err
	}
	var reduceErr error
	if r.reduce != nil && writeErr == nil && !interrupted.Load() && ctx.Err() == nil {
		reduceErr = r.runReduce(runCtx, outputs, quiet, stderr)
	}
	stopSignals()
	for _, c := range r.closers {
		if err := c.Close(); err != nil && writeErr == nil {
			writeErr = fmt.Errorf("output: %w", err)
		}
	}
	r.closers = nil
	if rep != nil {
		rep.stop()
	}
	st := r.engine.Stats()
	if !quiet {
		writeSummary(stderr, r.name, st, time.Since(start), notWritten, r.out.Written(), r.outPath)
		if r.statePath != "" {
			fmt.Fprintf(stderr, "  state: %s", r.statePath)
			if r.resumedLines > 0 {
				fmt.Fprintf(stderr, " (resumed: %d results were already in the output)", r.resumedLines)
			}
			if notWritten > 0 || ctx.Err() != nil || interrupted.Load() {
				fmt.Fprint(stderr, "; run the same command again to resume")
			}
			fmt.Fprintln(stderr)
		}
	}
	switch {
	case writeErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", writeErr)
		return exitFailed
	case reduceErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", reduceErr)
		if ctx.Err() != nil || interrupted.Load() {
			return exitInterrupted
		}
		return exitFailed
	case ctx.Err() != nil || interrupted.Load():
		return exitInterrupted
	case st.Failed > 0:
		return exitFailed
	}
	return exitOK
}

// runReduce reduces the outputs and writes the final output.
func (r *runner) runReduce(ctx context.Context, outputs []json.RawMessage, quiet bool, stderr io.Writer) error {
	start := time.Now()
	rr, err := batchagent.ReduceOutputs(ctx, r.job, outputs, *r.reduce)
	if err != nil {
		return err
	}
	line := append(append([]byte(nil), rr.Output...), '\n')
	if r.reduceOut == "" {
		if _, err := r.stdout.Write(line); err != nil {
			return fmt.Errorf("reduce output: %w", err)
		}
	} else if err := os.WriteFile(r.reduceOut, line, 0o644); err != nil {
		return fmt.Errorf("reduce output: %w", err)
	}
	if !quiet {
		where := r.reduceOut
		if where == "" {
			where = "stdout"
		}
		fmt.Fprintf(stderr, "  reduce: %d outputs in %d calls over %d levels (%s) → %s\n", rr.Reduced, rr.Calls, rr.Levels,
			time.Since(start).Round(time.Millisecond), where)
	}
	return nil
}

// gracePeriod bounds how long a first SIGINT/SIGTERM waits for the turns
// in flight before stopping at once.
const gracePeriod = 30 * time.Second

// handleSignals stops the run in two phases: the first SIGINT or SIGTERM
// drains the engine (no new inputs; agents stop after the turn in flight,
// which is checkpointed), the second, or the end of the grace period,
// cancels everything at once. The returned function stops the handler
// and waits for its goroutine.
func (r *runner) handleSignals(cancel context.CancelFunc, interrupted *atomic.Bool, stderr io.Writer) func() {
	sigs := make(chan os.Signal, 2) // a signal may arrive while the handler prints
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		interrupted.Store(true)
		r.engine.Drain()
		fmt.Fprintf(stderr, "\nbatchagent: stopping: finishing the turns in flight (up to %s; interrupt again to stop at once)\n", gracePeriod)
		t := time.NewTimer(gracePeriod)
		defer t.Stop()
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "batchagent: stopping at once")
			cancel()
		case <-t.C:
			cancel()
		case <-done:
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

// countLines counts the non-empty lines of a file.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	n, last := 0, byte('\n')
	for {
		k, err := f.Read(buf)
		for _, c := range buf[:k] {
			if c == '\n' && last != '\n' {
				n++
			}
			last = c
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}
