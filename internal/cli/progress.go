package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/batchagent/batchagent"
)

// Progress cadence: a live line on a terminal, a plain line otherwise.
const (
	ttyEvery   = 200 * time.Millisecond
	plainEvery = 5 * time.Second
)

// reporter prints progress while a run goes on. Its goroutine is owned by
// the reporter: stop ends it and waits.
type reporter struct {
	done chan struct{}
	wg   sync.WaitGroup
	tty  bool
	w    io.Writer
}

func startReporter(e *batchagent.Engine, total int, w io.Writer) *reporter {
	r := &reporter{done: make(chan struct{}), w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		r.tty = true
	}
	every := plainEvery
	if r.tty {
		every = ttyEvery
	}
	start := time.Now()
	r.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-r.done:
				return
			case now := <-tick.C:
				line := progressLine(e.Stats(), total, now.Sub(start))
				if r.tty {
					fmt.Fprintf(w, "\r\033[K%s", line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	})
	return r
}

func (r *reporter) stop() {
	close(r.done)
	r.wg.Wait()
	if r.tty {
		fmt.Fprint(r.w, "\r\033[K")
	}
}

// progressLine renders done/failed/active, agents/s, ETA and tokens.
func progressLine(st batchagent.Stats, total int, elapsed time.Duration) string {
	rate := float64(st.Done-st.Restored) / elapsed.Seconds()
	var b strings.Builder
	if total > 0 {
		fmt.Fprintf(&b, "done %d/%d", st.Done, total)
	} else {
		fmt.Fprintf(&b, "done %d", st.Done)
	}
	fmt.Fprintf(&b, " · failed %d · active %d · %.1f agents/s", st.Failed, st.Started-st.Done, rate)
	if total > 0 && rate > 0 && int(st.Done) < total {
		eta := time.Duration(float64(total-int(st.Done)) / rate * float64(time.Second))
		fmt.Fprintf(&b, " · ETA %s", eta.Round(time.Second))
	}
	fmt.Fprintf(&b, " · tokens %s", count(st.Usage.Total()))
	return b.String()
}

// writeSummary prints the end-of-run summary.
func writeSummary(w io.Writer, name string, st batchagent.Stats, wall time.Duration, notWritten, written int, outPath string) {
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
	fmt.Fprintf(w, "  model calls %d · turns %d · tool calls requested %d, executed %d\n", st.ModelCalls, st.Turns, st.ToolRequested, st.ToolExecuted)
	if len(st.Tools) > 1 {
		for _, t := range st.Tools {
			fmt.Fprintf(w, "    %s: requested %d, executed %d, coalesced %d, cache hits %d, errors %d\n", t.Name, t.Requested, t.Executed, t.Coalesced, t.CacheHits, t.Errors)
		}
	}
	fmt.Fprintf(w, "  tokens: prompt %s (cached %s, %s) · completion %s\n", count(st.Usage.PromptTokens), count(st.Usage.CachedTokens),
		share(st.Usage.CachedTokens, st.Usage.PromptTokens), count(st.Usage.CompletionTokens))
	if st.Limit > 0 || st.Throttles > 0 || st.Pauses > 0 {
		fmt.Fprintf(w, "  inflight limit %s · throttled calls %d · backpressure pauses %d", limitPath(st), st.Throttles, st.Pauses)
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

// limitPath renders the adaptive limit over time: its start, its range and
// where it ended ("16 → 4..16 → 9"), or the fixed limit.
func limitPath(st batchagent.Stats) string {
	h := st.LimitHistory
	if len(h) <= 1 {
		if st.Limit == 0 {
			return "unlimited"
		}
		return fmt.Sprint(st.Limit)
	}
	lo, hi := h[0].Limit, h[0].Limit
	for _, c := range h {
		lo, hi = min(lo, c.Limit), max(hi, c.Limit)
	}
	return fmt.Sprintf("%d → %d..%d over %d changes → %d", h[0].Limit, lo, hi, len(h)-1, h[len(h)-1].Limit)
}
