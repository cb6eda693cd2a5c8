package cli

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/batchagent/batchagent"
)

// progressEvery is how often the progress display reads the engine's
// counters and redraws.
const progressEvery = 200 * time.Millisecond

// reporter draws a live progress line with vbauerster/mpb while a run goes
// on: only on a terminal (elsewhere the summary alone is printed). mpb
// sizes the line to the terminal's width, truncating what does not fit,
// and redraws it in place, so a narrow terminal neither wraps it nor keeps
// stale copies. The reporter owns its goroutine and mpb's: stop ends both
// and removes the line.
type reporter struct {
	p    *mpb.Progress
	bar  *mpb.Bar
	done chan struct{}
	wg   sync.WaitGroup
	// unroute sends stderr's writes to stderr again; nil when they were
	// not routed through the display.
	unroute func()
}

// startReporter starts the progress line on w when w is a terminal; it
// returns nil otherwise.
// While it runs, what else is written to w (log lines, messages) goes
// through the display when w is the commands' stderrWriter. extra, when
// not nil, returns what to append to the line (the cost so far).
func startReporter(e *batchagent.Engine, total int, w io.Writer, extra func(batchagent.Stats) string) *reporter {
	f, ok := baseWriter(w).(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	r := newReporter(e.Stats, total, f, 0, nil, extra)
	if sw, ok := w.(*stderrWriter); ok {
		sw.route(r.p)
		r.unroute = func() { sw.route(nil) }
	}
	return r
}

// newReporter draws stats on w: at the terminal's width, or width when w
// is not a terminal; refreshed every progressEvery, or when refresh
// receives (for tests) if it is not nil. extra, when not nil, returns what
// to append to the line.
func newReporter(stats func() batchagent.Stats, total int, w io.Writer, width int, refresh <-chan any, extra func(batchagent.Stats) string) *reporter {
	opts := []mpb.ContainerOption{mpb.WithOutput(w), mpb.WithRefreshRate(progressEvery)}
	if width > 0 {
		opts = append(opts, mpb.WithWidth(width))
	}
	if refresh != nil {
		opts = append(opts, mpb.WithManualRefresh(refresh))
	}
	r := &reporter{p: mpb.New(opts...), done: make(chan struct{})}
	var snap atomic.Pointer[batchagent.Stats]
	st := stats()
	snap.Store(&st)
	start := time.Now()
	text := decor.Any(func(decor.Statistics) string {
		st := snap.Load()
		line := progressLine(*st, total, time.Since(start))
		if extra != nil {
			line += extra(*st)
		}
		return line
	})
	filler := mpb.NopStyle()
	if total > 0 {
		filler = mpb.BarStyle()
	}
	// The bar's total is the inputs; with no known total it never
	// completes by itself (stop removes it).
	r.bar = r.p.New(int64(max(total, 0)), filler, mpb.AppendDecorators(text), mpb.BarWidth(24), mpb.BarRemoveOnComplete())
	r.wg.Go(func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-tick.C:
			}
			st := stats()
			snap.Store(&st)
			if total > 0 {
				r.bar.SetCurrent(min(st.Done, int64(total)-1)) // complete only at stop
			}
		}
	})
	return r
}

// stop ends the reporter's goroutines and removes the progress line.
func (r *reporter) stop() {
	if r.unroute != nil {
		r.unroute()
	}
	close(r.done)
	r.wg.Wait()
	r.bar.Abort(true)
	r.p.Wait()
}

// progressLine renders done/failed, agents admitted and model calls in
// flight (with the concurrency limit), agents/s, ETA and tokens: the most
// useful first, since a narrow terminal truncates the end.
func progressLine(st batchagent.Stats, total int, elapsed time.Duration) string {
	rate := float64(st.Done-st.Restored) / elapsed.Seconds()
	var b strings.Builder
	if total > 0 {
		fmt.Fprintf(&b, "done %d/%d", st.Done, total)
	} else {
		fmt.Fprintf(&b, "done %d", st.Done)
	}
	fmt.Fprintf(&b, " · failed %d · agents %d", st.Failed, st.Started-st.Done)
	// Calls in flight are counted where admission gates them (a limit,
	// rate limits, a hosted backend); an ungated run has no such count.
	if st.Limit > 0 || st.Inflight > 0 || st.Waiting > 0 {
		fmt.Fprintf(&b, " · calls %d", st.Inflight)
		if st.Limit > 0 {
			fmt.Fprintf(&b, "/%d", st.Limit)
		}
		if st.Waiting > 0 {
			fmt.Fprintf(&b, " (+%d waiting)", st.Waiting)
		}
	}
	fmt.Fprintf(&b, " · %.1f agents/s", rate)
	if total > 0 && rate > 0 && int(st.Done) < total {
		eta := time.Duration(float64(total-int(st.Done)) / rate * float64(time.Second))
		fmt.Fprintf(&b, " · ETA %s", eta.Round(time.Second))
	}
	fmt.Fprintf(&b, " · tokens %s", count(st.Usage.Total()))
	return b.String()
}

// writeSummary prints the end-of-run summary.
// limitSource says where the limit on model calls in flight comes from
// (concurrencySource).
func writeSummary(w io.Writer, name string, st batchagent.Stats, wall time.Duration, notWritten, written int, outPath, limitSource string) {
	// Agents this run finished: the agents stopped mid-flight by an
	// interrupt are delivered (canceled) but did not finish.
	ran := st.Done - st.Restored - int64(notWritten)
	fmt.Fprintf(w, "batchagent: %s: %d results in %s (", name, st.Done-int64(notWritten), wall.Round(time.Millisecond))
	if st.Restored > 0 {
		fmt.Fprintf(w, "%d restored from the state file; %d run, ", st.Restored, ran)
	}
	fmt.Fprintf(w, "%.1f agents/s)\n", float64(ran)/wall.Seconds())
	fmt.Fprintf(w, "  ok %d · failed %d", st.OK, st.Failed-int64(notWritten))
	var kinds []string
	for _, k := range batchagent.Kinds {
		n := st.ByKind[k]
		if k == batchagent.KindCanceled {
			n -= int64(notWritten)
		}
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(kinds) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintln(w)
	if notWritten > 0 {
		fmt.Fprintf(w, "  interrupted: %d agents in flight were stopped and not written\n", notWritten)
	}
	fmt.Fprintf(w, "  model calls %s · turns %d · tool calls requested %d, executed %d\n", modelCalls(st), st.Turns, st.ToolCalls, st.ToolExecuted)
	if st.PackCalls > 0 || st.PackAlone > 0 {
		fmt.Fprintf(w, "  packed: %d results from %d calls · %d ran alone\n", st.Packed, st.PackCalls, st.PackAlone)
	}
	if len(st.Tools) > 1 {
		for _, t := range st.Tools {
			fmt.Fprintf(w, "    %s: requested %d, executed %d, coalesced %d, cache hits %d, errors %d\n", t.Name, t.Requested, t.Executed, t.Coalesced, t.CacheHits, t.Errors)
		}
	}
	fmt.Fprintf(w, "  tokens: prompt %s (cached %s, %s) · completion %s\n", count(st.Usage.PromptTokens), count(st.Usage.CachedTokens),
		share(st.Usage.CachedTokens, st.Usage.PromptTokens), count(st.Usage.CompletionTokens))
	fellBack := false
	for tier := range st.ByTier {
		fellBack = fellBack || tier > 0
	}
	if fellBack || st.BreakerChanges > 0 {
		var tiers []string
		for _, tier := range slices.Sorted(maps.Keys(st.ByTier)) {
			tiers = append(tiers, fmt.Sprintf("tier %d: %d", tier, st.ByTier[tier]))
		}
		fmt.Fprintf(w, "  answered by %s · breaker changes %d\n", strings.Join(tiers, ", "), st.BreakerChanges)
	}
	fmt.Fprintf(w, "  concurrency: %s\n", concurrencyLine(st, limitSource))
	if st.Throttles > 0 || st.Pauses > 0 || st.RateLimits.RPM > 0 || st.RateLimits.TPM > 0 {
		fmt.Fprintf(w, "  throttled calls %d · backpressure pauses %d", st.Throttles, st.Pauses)
		if rl := st.RateLimits; rl.RPM > 0 || rl.TPM > 0 {
			fmt.Fprintf(w, " · rate limits %d rpm, %d tpm", rl.RPM, rl.TPM)
		}
		fmt.Fprintln(w)
	}
	if outPath != "" {
		fmt.Fprintf(w, "  results: %s (%d lines written)\n", outPath, written)
	}
	if st.CheckpointErrors > 0 {
		fmt.Fprintf(w, "  checkpoint: %d saves failed; those agents' progress may be redone on resume\n", st.CheckpointErrors)
	}
}

// count renders a number compactly: 950, 12.3k, 4.5M.
func count(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// share renders part/whole as a percentage.
func share(part, whole int64) string {
	if whole == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole))
}

// modelCalls says how many model calls a server answered, with the
// attempts that got no answer counted apart: "18", "0 (18 attempts, none
// answered by the server)", "20 (23 attempts, 3 not answered)".
func modelCalls(st batchagent.Stats) string {
	answered := max(st.ModelCalls-st.Unanswered, 0)
	switch {
	case st.Unanswered <= 0:
		return fmt.Sprint(st.ModelCalls)
	case answered == 0:
		return fmt.Sprintf("0 (%d attempts, none answered by the server)", st.ModelCalls)
	}
	return fmt.Sprintf("%d (%d attempts, %d not answered)", answered, st.ModelCalls, st.Unanswered)
}
