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
	"github.com/batchagent/batchagent/router"
	"github.com/batchagent/batchagent/tool"
)

// reporterLogEvery is how often a run whose stderr is not a terminal
// prints its progress line (the first after progress.DefaultLogFirst).
const reporterLogEvery = 10 * time.Second

// startReporter draws the run's progress on w until the caller stops it:
// a live line on a terminal, elsewhere a plain line every
// reporterLogEvery, with the cost so far at price.
func startReporter(e *batchagent.Engine, total int, w io.Writer, price estimate.Price) *progress.Display {
	return progress.Start(w, progress.Config{LogEvery: reporterLogEvery, Source: func() progress.Counters { return runCounters(e.Stats(), total, price) }})
}

// runCounters is what the progress line says of an engine's stats: done
// and failed of total (0: unknown), the cost at price, agents admitted,
// model calls in flight (with the concurrency limit) and tokens.
func runCounters(st batchagent.Stats, total int, price estimate.Price) progress.Counters {
	c := progress.Counters{Done: st.Done, Failed: st.Failed, Restored: st.Restored, Total: int64(max(total, 0)), Unit: "agents",
		Parts: []string{fmt.Sprintf("agents %d", st.Started-st.Done)}, Usage: st.Usage, HasUsage: true}
	if spent, projected, ok := price.Projection(st, total); price.Known {
		c.Cost, c.CostKnown = spent, true
		if ok {
			c.Projected = projected
		}
	}
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

// summary is what the end-of-run summary reports.
type summary struct {
	name       string           // the job's
	st         batchagent.Stats // the engine's at the end
	wall       time.Duration    // how long the run took
	notWritten int              // agents stopped mid-flight or unsaved: not results
	written    int              // lines written to the output this run
	outPath    string           // the output; "" for stdout
	// limitSource says where the limit on model calls in flight comes
	// from (config.ConcurrencySource).
	limitSource string
	cost        string // the cost row's value (estimate.Price.Summary without "cost: ")
	state       string // the state row's value; "" for none
	// capped is the agents of notWritten the spend cap stopped, and
	// spendCap the row that says so ("" for none).
	capped   int
	spendCap string
	cache    string // the cache row's value (cacheLine); "" for none
	// deployments is the deployments row's value (deploymentsRow); ""
	// for a job on one backend URL.
	deployments string
}

// writeSummary prints the end-of-run summary as a table (progress.Table)
// fitted to w's width when w is a terminal.
func writeSummary(w io.Writer, s summary) {
	st := s.st
	// Agents this run finished: the agents stopped mid-flight by an
	// interrupt are delivered (canceled) but did not finish.
	ran := st.Done - st.Restored - int64(s.notWritten)
	heading := fmt.Sprintf("batchagent: %s: %d results in %s (", s.name, st.Done-int64(s.notWritten), s.wall.Round(time.Millisecond))
	if st.Restored > 0 {
		heading += fmt.Sprintf("%d restored from the state file; %d run, ", st.Restored, ran)
	}
	heading += fmt.Sprintf("%.1f agents/s)", float64(ran)/s.wall.Seconds())
	var t progress.Table
	agents := fmt.Sprintf("ok %d · failed %d", st.OK, st.Failed-int64(s.notWritten))
	var kinds []string
	for _, k := range batchagent.Kinds {
		n := st.ByKind[k]
		if k == batchagent.KindCanceled {
			n -= int64(s.notWritten)
		}
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(kinds) > 0 {
		agents += fmt.Sprintf(" (%s)", strings.Join(kinds, ", "))
	}
	t.Add("agents", "%s", agents)
	tools := toolTotals(st)
	var toolErrors int64
	for _, tt := range tools {
		toolErrors += tt.Errors
	}
	if toolErrors > 0 {
		v := fmt.Sprintf("%d of %d tool calls failed", toolErrors, st.ToolCalls)
		if len(tools) > 1 {
			var per []string
			for _, tt := range tools {
				if tt.Errors > 0 {
					per = append(per, fmt.Sprintf("%s %d", tt.Name, tt.Errors))
				}
			}
			v += fmt.Sprintf(" (%s)", strings.Join(per, ", "))
		}
		if s.state != "" {
			v += "; see batchagent status --agent N"
		}
		t.Add("tool errors", "%s", v)
	}
	if n := s.notWritten - s.capped; n > 0 {
		t.Add("interrupted", "%d agents in flight were stopped and not written", n)
	}
	if s.spendCap != "" {
		t.Add("spend cap", "%s", s.spendCap)
	}
	t.Add("model calls", "%s · turns %d", modelCalls(st), st.Turns)
	t.Add("tool calls", "requested %d, executed %d, errors %d", st.ToolCalls, st.ToolExecuted, toolErrors)
	if len(tools) > 1 {
		for _, tt := range tools {
			t.Add(tt.Name, "requested %d, executed %d, coalesced %d, cache hits %d, errors %d", tt.Requested, tt.Executed, tt.Coalesced, tt.CacheHits, tt.Errors)
		}
	}
	if st.PackCalls > 0 || st.PackAlone > 0 {
		t.Add("packed", "%d results from %d calls · %d ran alone", st.Packed, st.PackCalls, st.PackAlone)
	}
	if st.PackVerified > 0 {
		t.Add("pack checks", "%d of %d packed answers agreed with their task alone (%.0f%%)",
			st.PackAgreed, st.PackVerified, 100*float64(st.PackAgreed)/float64(st.PackVerified))
	}
	t.Add("tokens", "prompt %s (cached %s, %s) · completion %s", count(st.Usage.PromptTokens), count(st.Usage.CachedTokens),
		share(st.Usage.CachedTokens, st.Usage.PromptTokens), count(st.Usage.CompletionTokens))
	if m := st.Usage.MediaTokens; m > 0 {
		t.Add("media tokens", "%s, %s of the prompt (images, audio, documents)", count(m), share(m, st.Usage.PromptTokens))
	}
	fellBack := false
	for tier := range st.ByTier {
		fellBack = fellBack || tier > 0
	}
	if fellBack || st.BreakerChanges > 0 {
		var tiers []string
		for _, tier := range slices.Sorted(maps.Keys(st.ByTier)) {
			tiers = append(tiers, fmt.Sprintf("tier %d: %d", tier, st.ByTier[tier]))
		}
		t.Add("tiers", "answered by %s · breaker changes %d", strings.Join(tiers, ", "), st.BreakerChanges)
	}
	t.Add("concurrency", "%s", concurrencyLine(st, s.limitSource))
	if s.deployments != "" {
		t.Add("deployments", "%s", s.deployments)
	}
	if st.Throttles > 0 || st.Pauses > 0 || st.RateLimits.RPM > 0 || st.RateLimits.TPM > 0 || st.RateLimits.OTPM > 0 {
		v := fmt.Sprintf("%d calls · backpressure pauses %d", st.Throttles, st.Pauses)
		if rl := st.RateLimits; rl.RPM > 0 || rl.TPM > 0 {
			v += fmt.Sprintf(" · rate limits %d rpm, %d tpm", rl.RPM, rl.TPM)
		}
		if otpm := st.RateLimits.OTPM; otpm > 0 {
			v += fmt.Sprintf(" · %d output tokens a minute", otpm)
		}
		t.Add("throttled", "%s", v)
	}
	if s.cost != "" {
		t.Add("cost", "%s", s.cost)
	}
	if s.cache != "" {
		t.Add("cache", "%s", s.cache)
	}
	if s.outPath != "" {
		t.Add("results", "%s (%d lines written)", s.outPath, s.written)
	}
	if st.CheckpointErrors > 0 {
		t.Add("checkpoint", "%d saves failed; those agents' progress may be redone on resume", st.CheckpointErrors)
	}
	if s.state != "" {
		t.Add("state", "%s", s.state)
	}
	// A summary that cannot be written has nowhere else to go.
	_ = t.Write(w, heading, progress.Width(w))
}

// toolTotals sums st's per-tool counters by tool name (a name appears
// once per live spec, and once more for the specs no longer in use), in
// the order the names first appear.
func toolTotals(st batchagent.Stats) []tool.Stats {
	var out []tool.Stats
	at := map[string]int{}
	for _, ts := range st.Tools {
		i, ok := at[ts.Name]
		if !ok {
			at[ts.Name] = len(out)
			out = append(out, tool.Stats{Name: ts.Name})
			i = len(out) - 1
		}
		o := &out[i]
		o.Requested += ts.Requested
		o.Executed += ts.Executed
		o.Coalesced += ts.Coalesced
		o.CacheHits += ts.CacheHits
		o.Errors += ts.Errors
	}
	return out
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

// deploymentsRow says, for the summary, how many calls each of rt's
// deployments got, how many of those failed, and which breakers are not
// closed: "live 30 calls · dead 2 calls, 2 failed (breaker open)". It is
// "" for a nil rt.
func deploymentsRow(rt *router.Router) string {
	if rt == nil {
		return ""
	}
	var parts []string
	for _, st := range rt.Stats() {
		p := fmt.Sprintf("%s %d calls", st.Name, st.Requests)
		if st.Failures > 0 {
			p += fmt.Sprintf(", %d failed", st.Failures)
		}
		if st.State != "closed" {
			p += " (breaker " + st.State + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " · ")
}
