package jobrun

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/progress"
)

// startReporter draws the run's progress on w until the caller stops it:
// a live line on a terminal only (elsewhere the summary alone is printed),
// with the cost so far at price.
func startReporter(e *batchagent.Engine, total int, w io.Writer, price estimate.Price) *progress.Display {
	return progress.Start(w, progress.Config{Source: func() progress.Counters { return runCounters(e.Stats(), total, price) }})
}

// runCounters is what the progress line says of an engine's stats: done
// and failed of total (0: unknown), agents admitted, model calls in flight
// (with the concurrency limit), tokens and the cost at price.
func runCounters(st batchagent.Stats, total int, price estimate.Price) progress.Counters {
	c := progress.Counters{Done: st.Done, Failed: st.Failed, Restored: st.Restored, Total: int64(max(total, 0)), Unit: "agents",
		Parts: []string{fmt.Sprintf("agents %d", st.Started-st.Done)}, Usage: st.Usage, HasUsage: true,
		Cost: strings.TrimPrefix(price.Progress(st, total), " · ")}
	// Calls in flight are counted where admission gates them (a limit,
	// rate limits, a hosted backend); an ungated run has no such count.
	if st.Limit > 0 || st.Inflight > 0 || st.Waiting > 0 {
		calls := fmt.Sprintf("calls %d", st.Inflight)
		if st.Limit > 0 {
			calls += fmt.Sprintf("/%d", st.Limit)
		}
		if st.Waiting > 0 {
			calls += fmt.Sprintf(" (+%d waiting)", st.Waiting)
		}
		c.Parts = append(c.Parts, calls)
	}
	return c
}

// writeSummary prints the end-of-run summary.
// limitSource says where the limit on model calls in flight comes from
// (config.ConcurrencySource).
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
func count(n int64) string { return progress.Count(n) }

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
