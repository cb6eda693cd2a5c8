package report

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// MaxTimelineRows is the most agents the timeline draws; a run with more
// is sampled evenly by index.
const MaxTimelineRows = 300

// chartWidth is the width of every chart but the timeline, in SVG units
// (the page scales it); timelineWidth is the timeline's, which spans the
// page.
const (
	chartWidth    = 760
	timelineWidth = 1560
)

// chart is one rendered chart: its hook (data-chart), title and body
// (the SVG and its caption).
type chart struct {
	ID    string        `json:"id"`
	Title string        `json:"-"`
	Body  template.HTML `json:"body"`
}

// charts renders every chart of d, in page order.
func charts(d *Data) []chart {
	samples, recorded := d.timeline()
	return []chart{
		{"timeline", "Agent timeline", timelineChart(d)},
		{"throughput", "Throughput and agents running", throughputChart(d, samples)},
		{"agents", "Agents: model call / in a tool / waiting for a slot", agentsChart(samples, recorded)},
		{"limit", "Adaptive limit and throttled answers", limitChart(samples, recorded)},
		{"ttft", "Time to first token", ttftChart(d)},
		{"queue", "Queue wait for a slot", queueChart(d)},
		{"latency", "Turn latency", histogramChart("turn latency", latencyValues(d), "turns (queue wait + backoff + inference + tool wait)")},
		{"errors", "Failures by kind", errorsChart(d)},
		{"tools", "Tool calls", toolsChart(d)},
		{"cost", "Cost", costChart(d, samples)},
	}
}

// body joins an SVG and its caption into a chart's body.
func body(svg, caption string) template.HTML {
	// Both are built from escaped text (esc) and fixed markup.
	return template.HTML(svg + `<p class="caption">` + esc(caption) + `</p>`)
}

// timelineRows returns the agents the timeline draws: all of them, or
// MaxTimelineRows sampled evenly by index.
func timelineRows(agents []Agent) []Agent {
	n := len(agents)
	if n <= MaxTimelineRows {
		return agents
	}
	rows := make([]Agent, MaxTimelineRows)
	for i := range rows {
		rows[i] = agents[i*n/MaxTimelineRows]
	}
	return rows
}

// timelineChart draws a row per agent and a segment per part of each of
// its turns; an agent without recorded turns is one bar from its start to
// its end.
func timelineChart(d *Data) template.HTML {
	rows := timelineRows(d.Agents)
	rowH := min(12, max(1.5, 450/float64(max(len(rows), 1))))
	h := 28 + 38 + rowH*float64(max(len(rows), 1))
	dur := d.Duration().Seconds()
	p := newPlot("agent timeline", timelineWidth, h, 0, dur, 0, 0, 0)
	p.legend(legendItem{"queue wait", "queue"}, legendItem{"backoff", "backoff"},
		legendItem{"inference", "inference"}, legendItem{"tool wait", "tools"}, legendItem{"no turns recorded", "total"},
		legendItem{"failed agent's inference", "failed-agent"})
	if len(rows) == 0 {
		p.note("no agents")
		return body(p.end(), "no agents have a state")
	}
	fmt.Fprintf(&p.b, `<g class="rows" data-rows="%d" data-agents="%d">`, len(rows), len(d.Agents))
	sec := func(t time.Time) float64 { return t.Sub(d.Start).Seconds() }
	for i, a := range rows {
		y := p.top + float64(i)*rowH
		title := fmt.Sprintf("agent %d: %s", a.Index, a.Status)
		if a.Kind != "" {
			title += " (" + a.Kind + ")"
		}
		fmt.Fprintf(&p.b, `<g class="row" data-index="%d" data-status="%s"><title>%s</title>`, a.Index, esc(a.Status), esc(title))
		seg := func(class string, from float64, d time.Duration) float64 {
			to := from + d.Seconds()
			if d > 0 {
				x := p.X(from)
				fmt.Fprintf(&p.b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
					class, x, y, max(p.X(to)-x, 0.5), max(rowH-1, 1))
			}
			return to
		}
		switch {
		case len(a.Spans) > 0:
			for _, s := range a.Spans {
				t := sec(s.Start)
				t = seg("queue", t, s.Queue)
				t = seg("backoff", t, s.Backoff)
				t = seg("inference", t, s.Inference)
				seg("tools", t, s.Tools)
			}
		case !a.Started.IsZero() && a.Total > 0:
			seg("total", sec(a.Started), a.Total)
		}
		p.b.WriteString(`</g>`)
	}
	p.b.WriteString(`</g>`)
	p.axes("time since start", "agents", "", fmtSeconds, func(float64) string { return "" })
	caption := fmt.Sprintf("%d agents", len(d.Agents))
	if len(rows) < len(d.Agents) {
		caption = fmt.Sprintf("%d of %d agents, sampled evenly by index", len(rows), len(d.Agents))
	}
	return body(p.end(), caption)
}

// throughputChart draws the results per second and the agents in flight
// over time.
func throughputChart(d *Data, samples []Sample) template.HTML {
	if len(samples) == 0 {
		p := newPlot("throughput", chartWidth, 260, 0, 1, 0, 1, 0)
		p.axes("time since start", "results/s", "", fmtSeconds, fmtNum)
		p.note("no results yet")
		return body(p.end(), "no results yet")
	}
	xs := make([]float64, len(samples))
	rate := make([]float64, len(samples))
	active := make([]float64, len(samples))
	last := samples[len(samples)-1].T
	window := max(last/50, 1) // seconds the rate is averaged over
	j := 0
	var maxRate, maxActive float64
	for i, s := range samples {
		xs[i], active[i] = s.T, float64(s.Active)
		for j < i && s.T-samples[j+1].T >= window {
			j++
		}
		if dt := s.T - samples[j].T; dt > 0 {
			rate[i] = float64(s.Done-samples[j].Done) / dt
		}
		maxRate, maxActive = max(maxRate, rate[i]), max(maxActive, active[i])
	}
	p := newPlot("throughput", chartWidth, 260, 0, last, 0, maxRate, max(maxActive, 1))
	p.legend(legendItem{"results/s", "s-rate"}, legendItem{"agents running (right axis)", "s-active"})
	p.axes("time since start", "results/s", "agents running", fmtSeconds, fmtNum)
	p.line("s-rate", "rate", xs, rate, false, false)
	p.line("s-active", "active", xs, active, true, true)
	done := samples[len(samples)-1].Done
	caption := fmt.Sprintf("%d results", done)
	if last > 0 {
		caption += fmt.Sprintf(" in %s: %.2f/s on average", fmtSeconds(math.Round(last)), float64(done)/last)
	}
	return body(p.end(), caption)
}

// agentSeries are the series of the agents chart: the agents running split
// by what they do, with their labels and classes.
var agentSeries = []struct {
	label, class, series string
	value                func(Sample) int64
}{
	{"in a model call", "s-calling", "calling", func(s Sample) int64 { return s.AgentsCalling }},
	{"in a tool", "s-tools", "tools", func(s Sample) int64 { return s.AgentsInTools }},
	{"waiting for a slot", "s-waiting", "waiting", func(s Sample) int64 { return s.AgentsWaitingForSlot }},
	{"other (rendering, back-off, validating, saving)", "s-other", "other", Sample.AgentsOther},
}

// agentsChart draws the agents running over time, split by what they do:
// in a model call, executing tool calls, waiting for a slot, and the rest.
func agentsChart(samples []Sample, recorded bool) template.HTML {
	if !recorded {
		p := newPlot("agents by state", chartWidth, 260, 0, 1, 0, 1, 0)
		p.axes("time since start", "agents", "", fmtSeconds, fmtNum)
		p.note("not recorded")
		return body(p.end(), "not recorded: this run's state file holds no samples of what its agents did (they are recorded by batchagent run with a state file)")
	}
	xs := make([]float64, len(samples))
	ys := make([][]float64, len(agentSeries))
	var top int64
	peak := make([]int64, len(agentSeries))
	for i := range ys {
		ys[i] = make([]float64, len(samples))
	}
	for j, s := range samples {
		xs[j] = s.T
		for i, a := range agentSeries {
			v := a.value(s)
			ys[i][j] = float64(v)
			peak[i] = max(peak[i], v)
			top = max(top, v)
		}
	}
	p := newPlot("agents by state", chartWidth, 260, 0, xs[len(xs)-1], 0, max(float64(top), 1), 0)
	items := make([]legendItem, len(agentSeries))
	for i, a := range agentSeries {
		items[i] = legendItem{a.label, a.class}
	}
	p.legend(items...)
	p.axes("time since start", "agents", "", fmtSeconds, fmtNum)
	for i, a := range agentSeries {
		p.line(a.class, a.series, xs, ys[i], false, true)
	}
	return body(p.end(), fmt.Sprintf("at most %d agents in a model call, %d in a tool, %d waiting for a slot (admission to a model call), %d doing something else at once",
		peak[0], peak[1], peak[2], peak[3]))
}

// limitChart draws the adaptive limit and the model calls in flight, and
// the throttled answers so far on the right axis.
func limitChart(samples []Sample, recorded bool) template.HTML {
	if !recorded {
		p := newPlot("adaptive limit", chartWidth, 260, 0, 1, 0, 1, 0)
		p.axes("time since start", "model calls", "", fmtSeconds, fmtNum)
		p.note("not recorded")
		return body(p.end(), "not recorded: this run's state file holds no samples of the limit (they are recorded by batchagent run with a state file)")
	}
	xs := make([]float64, len(samples))
	limit := make([]float64, len(samples))
	inflight := make([]float64, len(samples))
	throttles := make([]float64, len(samples))
	var top, maxThrottles float64
	for i, s := range samples {
		xs[i], limit[i], inflight[i], throttles[i] = s.T, float64(s.Limit), float64(s.Inflight), float64(s.Throttles)
		top, maxThrottles = max(top, limit[i], inflight[i]), max(maxThrottles, throttles[i])
	}
	last := samples[len(samples)-1]
	p := newPlot("adaptive limit", chartWidth, 260, 0, last.T, 0, max(top, 1), max(maxThrottles, 1))
	p.legend(legendItem{"limit", "s-limit"}, legendItem{"model calls in flight", "s-inflight"}, legendItem{"throttled answers (right axis)", "s-throttles"})
	p.axes("time since start", "model calls", "throttled answers", fmtSeconds, fmtNum)
	p.line("s-inflight", "inflight", xs, inflight, false, true)
	p.line("s-limit", "limit", xs, limit, false, true) // dashed, over the calls in flight
	p.line("s-throttles", "throttles", xs, throttles, true, true)
	caption := fmt.Sprintf("%d throttled answers (429s, overload)", last.Throttles)
	if top == 0 || last.Limit == 0 {
		caption += "; no limit on model calls in flight at the end"
	} else {
		caption += fmt.Sprintf("; limit %d at the end", last.Limit)
	}
	return body(p.end(), caption)
}

// ttftChart draws the distribution of the times to first token: per turn
// where turns are recorded, else per agent (its first call's).
func ttftChart(d *Data) template.HTML {
	v, perTurn := durations(d, func(a Agent) time.Duration { return a.TTFT }, func(s Span) time.Duration { return s.TTFT })
	per := "agents' first answered model calls (from the request's sending; the slot wait is the queue wait's)"
	if perTurn {
		per = "turns (from the request's sending; the slot wait is the queue wait's)"
	}
	return histogramChart("time to first token", v, per)
}

// queueChart draws the distribution of the waits for a slot (admission to
// a model call): per turn where turns are recorded, else per agent (its
// whole wait).
func queueChart(d *Data) template.HTML {
	v, perTurn := durations(d, func(a Agent) time.Duration { return a.Queue }, func(s Span) time.Duration { return s.Queue })
	per := "agents that waited for a slot (all their turns' waits)"
	if perTurn {
		per = "turns that waited for a slot before their model call"
	}
	return histogramChart("queue wait", v, per)
}

// durations returns, in seconds, the positive values of ofSpan over every
// recorded turn, and of ofAgent for agents with no turns recorded; perTurn
// says whether any turn was.
func durations(d *Data, ofAgent func(Agent) time.Duration, ofSpan func(Span) time.Duration) (v []float64, perTurn bool) {
	for _, a := range d.Agents {
		perTurn = perTurn || len(a.Spans) > 0
		if len(a.Spans) == 0 {
			if t := ofAgent(a); t > 0 {
				v = append(v, t.Seconds())
			}
			continue
		}
		for _, s := range a.Spans {
			if t := ofSpan(s); t > 0 {
				v = append(v, t.Seconds())
			}
		}
	}
	return v, perTurn
}

// latencyValues returns the turns' latencies (queue wait, backoff,
// inference and tool wait), in seconds.
func latencyValues(d *Data) []float64 {
	var v []float64
	for _, a := range d.Agents {
		for _, s := range a.Spans {
			if l := s.Queue + s.Backoff + s.Inference + s.Tools; l > 0 {
				v = append(v, l.Seconds())
			}
		}
	}
	return v
}

// histogramChart draws the distribution of values (seconds) in about 20
// bins, each bar with its count in data-value; label names the values'
// axis, per what each value is.
func histogramChart(label string, values []float64, per string) template.HTML {
	if len(values) == 0 {
		p := newPlot(label, chartWidth, 240, 0, 1, 0, 1, 0)
		p.axes(label, "count", "", fmtSeconds, fmtNum)
		p.note("none recorded")
		return body(p.end(), "none recorded")
	}
	sorted := slices.Sorted(slices.Values(values))
	ticks := niceTicks(0, sorted[len(sorted)-1], 20)
	step := ticks[1] - ticks[0]
	counts := make([]int, len(ticks)-1)
	for _, v := range sorted {
		counts[min(int(v/step), len(counts)-1)]++
	}
	top := float64(slices.Max(counts))
	p := newPlot(label, chartWidth, 240, 0, ticks[len(ticks)-1], 0, top, 0)
	p.axes(label, "count", "", fmtSeconds, fmtNum)
	p.b.WriteString(`<g class="bars">`)
	for i, c := range counts {
		lo, hi := ticks[i], ticks[i+1]
		x := p.X(lo)
		fmt.Fprintf(&p.b, `<rect class="bar" data-value="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s–%s: %d</title></rect>`,
			c, x+0.5, p.Y(float64(c)), max(p.X(hi)-x-1, 0.5), p.Y(0)-p.Y(float64(c)), fmtSeconds(lo), fmtSeconds(hi), c)
	}
	p.b.WriteString(`</g>`)
	q := func(f float64) string { return fmtSeconds(sorted[min(int(f*float64(len(sorted))), len(sorted)-1)]) }
	return body(p.end(), fmt.Sprintf("%d %s; p50 %s, p90 %s, p99 %s, max %s", len(sorted), per, q(0.5), q(0.9), q(0.99), fmtSeconds(sorted[len(sorted)-1])))
}

// errorsChart draws a bar per error kind, the most frequent first.
func errorsChart(d *Data) template.HTML {
	kinds := slices.SortedFunc(maps.Keys(d.Totals.ByKind), func(a, b string) int {
		return cmp.Or(cmp.Compare(d.Totals.ByKind[b], d.Totals.ByKind[a]), strings.Compare(a, b))
	})
	h := 40 + 24*float64(max(len(kinds), 1))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %g" width="%d" height="%g" role="img" aria-label="failures by kind">`, chartWidth, h, chartWidth, h)
	if len(kinds) == 0 {
		b.WriteString(`<text class="note" x="20" y="36">no failures</text></svg>`)
		return body(b.String(), "no failures")
	}
	top := float64(d.Totals.ByKind[kinds[0]])
	b.WriteString(`<g class="bars">`)
	for i, k := range kinds {
		n := d.Totals.ByKind[k]
		y := 16 + 24*float64(i)
		w := max(float64(n)/top*(chartWidth-260), 1)
		fmt.Fprintf(&b, `<g class="kind" data-kind="%s" data-value="%d"><text x="170" y="%.1f" text-anchor="end">%s</text>`, esc(k), n, y+13, esc(k))
		fmt.Fprintf(&b, `<rect class="bar failed" data-value="%d" x="180" y="%.1f" width="%.1f" height="18"/>`, n, y, w)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%d</text></g>`, 186+w, y+13, n)
	}
	b.WriteString(`</g></svg>`)
	return body(b.String(), fmt.Sprintf("%d failed of %d done", d.Totals.Failed, d.Totals.Done))
}

// toolStats are the tool counters the tools chart draws, with their labels.
var toolStats = []struct{ key, label string }{
	{"requested", "requested"}, {"executed", "executed"}, {"coalesced", "coalesced"}, {"cached", "cache hits"},
	{"errors", "errors"},
}

// toolsChart draws, per tool, the calls requested, executed, coalesced
// into another's execution, answered from the cache, and that returned an
// error.
func toolsChart(d *Data) template.HTML {
	var top int64
	for _, t := range d.Tools {
		top = max(top, t.Requested, t.Executed, t.Errors)
	}
	n := float64(len(toolStats))
	h := 40 + n*16*float64(max(len(d.Tools), 1)) + 12*float64(len(d.Tools))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %g" width="%d" height="%g" role="img" aria-label="tool calls">`, chartWidth, h, chartWidth, h)
	if len(d.Tools) == 0 {
		b.WriteString(`<text class="note" x="20" y="36">no tools</text></svg>`)
		return body(b.String(), "the job has no tools, or their counters were not recorded")
	}
	var requested, executed, errs int64
	y := 12.0
	for _, t := range d.Tools {
		requested += t.Requested
		executed += t.Executed
		errs += t.Errors
		fmt.Fprintf(&b, `<g class="tool" data-tool="%s"><text class="label" x="8" y="%.1f">%s</text>`, esc(t.Name), y+24, esc(t.Name))
		for i, v := range []int64{t.Requested, t.Executed, t.Coalesced, t.CacheHits, t.Errors} {
			yy := y + float64(i)*16
			w := 0.0
			if top > 0 {
				w = float64(v) / float64(top) * (chartWidth - 340)
			}
			fmt.Fprintf(&b, `<text x="250" y="%.1f" text-anchor="end">%s</text>`, yy+12, toolStats[i].label)
			fmt.Fprintf(&b, `<rect class="bar t-%s"%s data-stat="%s" data-value="%d" x="260" y="%.1f" width="%.1f" height="13"/>`,
				toolStats[i].key, color("fill", "t-"+toolStats[i].key), toolStats[i].key, v, yy, max(w, 0.5))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%d</text>`, 266+w, yy+12, v)
		}
		b.WriteString(`</g>`)
		y += n*16 + 12
	}
	b.WriteString(`</svg>`)
	caption := fmt.Sprintf("%d calls requested, %d executed", requested, executed)
	if requested > 0 {
		caption += fmt.Sprintf(" (%.0f%% saved by coalescing and the cache)", 100*float64(requested-min(executed, requested))/float64(requested))
	}
	caption += fmt.Sprintf("; %d returned an error (shown to the model, which went on)", errs)
	return body(b.String(), caption)
}

// costChart draws the cost so far over time, with the total and where
// the price comes from.
func costChart(d *Data, samples []Sample) template.HTML {
	total, known := d.Cost()
	if !known {
		var b strings.Builder
		fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d 60" width="%d" height="60" role="img" aria-label="cost"><text class="note" x="20" y="36">cost unknown</text></svg>`, chartWidth, chartWidth)
		model := d.Info.Model
		if model == "" {
			model = `""`
		}
		return body(b.String(), fmt.Sprintf("cost unknown: no price for model %s (set pricing in the job file)", model))
	}
	caption := fmt.Sprintf("$%.4f for %d tokens (prices: %s)", total, d.Totals.Usage.Total(), d.Info.PriceSource)
	if len(samples) == 0 {
		p := newPlot("cost", chartWidth, 220, 0, 1, 0, 1, 0)
		p.axes("time since start", "cost ($)", "", fmtSeconds, fmtNum)
		p.note("no samples")
		return body(p.end(), caption)
	}
	xs := make([]float64, len(samples))
	ys := make([]float64, len(samples))
	for i, s := range samples {
		xs[i], ys[i] = s.T, s.Cost
	}
	p := newPlot("cost", chartWidth, 220, 0, xs[len(xs)-1], 0, max(slices.Max(ys), total, 1e-6), 0)
	p.legend(legendItem{"cost so far ($)", "s-cost"})
	p.axes("time since start", "cost ($)", "", fmtSeconds, fmtNum)
	p.line("s-cost", "cost", xs, ys, false, false)
	return body(p.end(), caption)
}
