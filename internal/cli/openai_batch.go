package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/openaibatch"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/internal/progress"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
)

// batchFlags are the flags of `batchagent run --openai-batch`.
type batchFlags struct {
	input   string // the requests file
	out     string // the results file
	backend string // backend URL for every model the requests name
	config  string // or a serve config: its backends and agents
	state   string // the store's directory; default OUT.batch
	quiet   bool
}

// runOpenAIBatch opens the batch store and the backends (or the gateway of
// a serve config) and runs a file in OpenAI's batch input format through
// the gateway's Batch API in-process (openaibatch.Run), showing its
// progress on stderr; openaibatch.Run writes every line's
// result to f.out in input order: output lines and error lines, OpenAI's
// format, each custom_id once. Its store (f.state) makes it resumable: run
// again with the same input, it continues the batch, keeping the lines
// done.
func runOpenAIBatch(ctx context.Context, f batchFlags, logger *slog.Logger, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "batchagent run --openai-batch: "+format+"\n", args...)
		return code
	}
	if f.out == "" || f.out == "-" {
		return fail(exitUsage, "--out FILE is required")
	}
	reads := []outfile.File{{Object: "the --openai-batch file", Path: f.input}, {Object: "the --config file", Path: f.config}}
	if err := outfile.CheckFiles([]outfile.File{jobrun.OutputFile(f.out, true)}, reads); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if (f.backend == "") == (f.config == "") {
		return fail(exitUsage, "give --backend URL or --config serve.yaml (not both)")
	}
	in, err := openaibatch.Scan(f.input)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if f.state == "" {
		f.state = f.out + ".batch"
	}
	// One run per state directory and output: a second would run the same
	// lines again and write the same file.
	if err := os.MkdirAll(f.state, 0o755); err != nil {
		return fail(exitFailed, "--state: %v", err)
	}
	holder := fmt.Sprintf("pid %d: batchagent run --openai-batch %s → %s", os.Getpid(), f.input, f.out)
	for _, t := range []struct{ path, what string }{{filepath.Join(f.state, "batches.db"), "state directory"}, {f.out, "output"}} {
		if fi, err := os.Stat(t.path); err == nil && !fi.Mode().IsRegular() {
			continue // a device or a pipe: nothing to guard, and no room for a sidecar
		}
		lock, err := outfile.TakeLock(t.path, t.what, holder)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		defer lock.Close()
	}
	store, err := batchapi.Open(f.state)
	if err != nil {
		return fail(exitFailed, "--state: %v", err)
	}
	defer store.Close()

	var srv *server.Server
	if f.config != "" {
		sc, err := config.LoadServe(f.config)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		g, err := sc.Open(ctx, store, logger, environ)
		if err != nil {
			return fail(exitUsage, "%s: %v", f.config, err)
		}
		defer g.Close()
		srv = g.Server
	} else {
		backends := map[string]batchagent.Backend{}
		for _, m := range in.Models {
			if strings.HasPrefix(m, server.AgentPrefix) {
				return fail(exitUsage, "model %q: agents need --config", m)
			}
			model, err := config.OpenBackend(ctx, f.backend, m, "", environ)
			if err != nil {
				return fail(exitUsage, "%v", err)
			}
			backends[m] = batchagent.Backend{Model: model, Name: m}
		}
		engine, err := batchagent.New(batchagent.Config{Logger: logger})
		if err != nil {
			return fail(exitFailed, "%v", err)
		}
		if srv, err = server.New(server.Config{Engine: engine, Backends: backends, Batches: store, Logger: logger}); err != nil {
			return fail(exitFailed, "%v", err)
		}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		srv.Shutdown(sctx)
	}()

	var shown *batchShown
	if !f.quiet {
		shown = showBatch(stderr)
	}
	b, err := openaibatch.Run(ctx, openaibatch.Config{API: srv, Input: in, Out: f.out, OnPoll: shown.poll})
	shown.stop()
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		fmt.Fprintf(stderr, "batchagent run --openai-batch: interrupted; run again to resume (state in %s)\n", f.state)
		return exitInterrupted
	case err != nil:
		return fail(exitFailed, "%v", err)
	}
	if !f.quiet {
		writeBatchSummary(stderr, b, in.Models, f.out)
	}
	if b.Status == "failed" {
		for _, e := range b.Errors.Data {
			fmt.Fprintf(stderr, "%s:%d: %s: %s\n", f.input, e.Line, e.Code, e.Message)
		}
		return exitFailed
	}
	if b.Status != "completed" || b.RequestCounts.Failed > 0 {
		return exitFailed
	}
	return exitOK
}

// batchLogEvery is how often the progress of `run --openai-batch` is
// printed when stderr is not a terminal.
const batchLogEvery = 10 * time.Second

// batchShown is the progress display of `run --openai-batch`: the batch's
// request counts as last polled. A nil batchShown shows nothing (--quiet).
type batchShown struct {
	d    *progress.Display
	last atomic.Pointer[batchPolled]
}

// batchPolled is one state of the batch, with the requests it had done
// when first polled (done before this run: left out of the rate).
type batchPolled struct {
	b        openaibatch.Batch
	restored int64
}

// showBatch starts the display on w. The caller must call stop.
func showBatch(w io.Writer) *batchShown {
	s := &batchShown{}
	s.d = progress.Start(w, progress.Config{LogEvery: batchLogEvery, Source: s.counters})
	return s
}

// poll records b, the batch's state just read.
func (s *batchShown) poll(b openaibatch.Batch) {
	if s == nil {
		return
	}
	p := &batchPolled{b: b, restored: b.RequestCounts.Completed + b.RequestCounts.Failed}
	if prev := s.last.Load(); prev != nil {
		p.restored = prev.restored
	}
	s.last.Store(p)
}

// counters is what the display shows of the batch last polled.
func (s *batchShown) counters() progress.Counters {
	p := s.last.Load()
	if p == nil {
		return progress.Counters{Label: "batch", Unit: "requests"}
	}
	rc := p.b.RequestCounts
	return progress.Counters{Label: fmt.Sprintf("batch %s %s", p.b.ID, p.b.Status), Done: rc.Completed + rc.Failed,
		Failed: rc.Failed, Restored: p.restored, Total: rc.Total, Unit: "requests"}
}

// stop removes the display.
func (s *batchShown) stop() {
	if s != nil {
		s.d.Stop()
	}
}

// writeBatchSummary prints the summary of the ended batch b, run over the
// requests naming models, whose results are at outPath: its counts, then
// a table (progress.Table) of its tokens and their cost at the built-in
// table's price of its model, fitted to w's width when w is a terminal.
func writeBatchSummary(w io.Writer, b openaibatch.Batch, models []string, outPath string) {
	rc := b.RequestCounts
	heading := fmt.Sprintf("batch %s %s: %d completed, %d failed of %d", b.ID, b.Status, rc.Completed, rc.Failed, rc.Total)
	var t progress.Table
	if b.Usage != nil {
		u := b.Usage.LLM()
		t.Add("tokens", "prompt %s (cached %s) · completion %s", progress.Count(u.PromptTokens), progress.Count(u.CachedTokens), progress.Count(u.CompletionTokens))
		switch p, ok := prices.Lookup(b.Model); {
		case len(models) > 1:
			t.Add("cost", "unknown (the requests name %d models; the results' usage has each line's tokens)", len(models))
		case ok:
			t.Add("cost", "%s", strings.TrimPrefix(estimate.Price{Price: p, Known: true, Source: "table dated " + prices.Dated}.Summary(u), "cost: "))
		default:
			t.Add("cost", "%s", strings.TrimPrefix(estimate.Price{Model: b.Model}.Summary(u), "cost: "))
		}
	}
	t.Add("results", "%s", outPath)
	// A summary that cannot be written has nowhere else to go.
	_ = t.Write(w, heading, progress.Width(w))
}
