package report

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

// counter is one number at the top of the page: the element's id, its
// label, its value for tests (data-value) and its text.
type counter struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Value string `json:"value"`
	Text  string `json:"text"`
}

// counters returns the page's counters for d.
func counters(d *Data) []counter {
	n := func(id, label string, v int64) counter {
		return counter{id, label, fmt.Sprint(v), fmtNum(float64(v))}
	}
	inputs := counter{"inputs", "inputs", "-1", "unknown"}
	if d.Totals.Inputs >= 0 {
		inputs = n("inputs", "inputs", int64(d.Totals.Inputs))
	}
	cs := []counter{
		inputs,
		n("done", "done", d.Totals.Done),
		n("ok", "ok", d.Totals.OK),
		n("failed", "failed", d.Totals.Failed),
		n("running", "running", d.Totals.Running),
		n("model-calls", "model calls", d.Totals.ModelCalls),
		n("tokens", "tokens", d.Totals.Usage.Total()),
	}
	if m := d.Totals.Usage.MediaTokens; m > 0 {
		// The part of the prompt that is images, audio and documents.
		cs = append(cs, n("media-tokens", "media tokens", m))
	}
	cs = append(cs, progress(d)...)
	cost := counter{"cost", "cost", "", "unknown"}
	if c, ok := d.Cost(); ok {
		cost = counter{"cost", "cost", fmt.Sprintf("%.6f", c), fmt.Sprintf("$%.4f", c)}
	}
	dur := d.Duration().Round(time.Second)
	return append(cs, cost, counter{"duration", "duration", fmt.Sprint(dur.Seconds()), dur.String()})
}

// page is what writeTo draws.
type page struct {
	Title    string
	Info     Info
	Start    string
	Runs     string // which runs the page covers; "" for one or unknown
	Counters []counter
	Charts   []chart
	Results  template.HTML // the results table's section; "" for none
	Live     bool          // the live page: the events script, the running state
	State    string
}

// newPage builds the page of d.
func newPage(d *Data, live bool) page {
	title := "batchagent report: " + d.Info.Job
	state := "done"
	if live {
		title = "batchagent live: " + d.Info.Job
		if !d.Done {
			state = "running"
		}
	}
	start := ""
	if !d.Start.IsZero() {
		start = d.Start.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return page{Title: title, Info: d.Info, Start: start, Runs: runsText(d.Runs), Counters: counters(d), Charts: charts(d),
		Results: resultsSection(d.Results), Live: live, State: state}
}

// Write writes the report of d to w: one self-contained HTML document
// (styles and scripts inline, no external reference) that opens offline;
// its one script draws the results table (d.Results) with search, a
// filter by error kind and paging.
// Text from d (the job's name, error kinds, tool names) is escaped. It
// returns w's error.
func Write(w io.Writer, d *Data) error {
	p := newPage(d, false)
	return p.writeTo(w)
}

// htmlEscaper escapes text for HTML text, RCDATA (the title) and quoted
// attribute values, byte for byte as html/template does in those
// contexts: html.EscapeString's five characters, plus '+' as &#43; and NUL
// as U+FFFD. Every other byte, invalid UTF-8 included, stays as it is.
var htmlEscaper = strings.NewReplacer(
	"\x00", "\uFFFD",
	`"`, "&#34;",
	"&", "&amp;",
	"'", "&#39;",
	"+", "&#43;",
	"<", "&lt;",
	">", "&gt;",
)

// writeTo writes the page to w and returns w's error. It writes by hand
// what a template would, so that the binary does not link text/template's
// evaluator: its reflective method calls make the linker keep every
// exported method of every reachable type. The Content-Security-Policy
// forbids every load outside the page itself (and, for the live page, its
// events), so a chart can never reach the network. TestPageMatchesTemplate
// holds the bytes equal to the template this replaced.
func (p *page) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	// A bufio.Writer keeps its first error and skips every later write;
	// Flush returns it.
	text := func(s string) { _, _ = htmlEscaper.WriteString(bw, s) }
	raw := func(s string) { _, _ = bw.WriteString(s) }
	raw(pageHead)
	raw(" script-src 'unsafe-inline';")
	if p.Live {
		raw(" connect-src 'self';")
	}
	raw("\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<link rel=\"icon\" href=\"data:,\">\n<title>")
	text(p.Title)
	raw("</title>\n")
	raw(pageStyle)
	raw("\n</head>\n<body data-state=\"")
	text(p.State)
	raw("\">\n<h1>")
	text(p.Info.Job)
	raw("</h1>\n<p class=\"meta\">")
	if p.Info.Model != "" {
		raw("model ")
		text(p.Info.Model)
		raw(" · ")
	}
	if p.Start != "" {
		raw("started ")
		text(p.Start)
		raw(" · ")
	}
	raw("<span class=\"state\" id=\"state\">")
	text(p.State)
	raw("</span></p>\n")
	if p.Runs != "" {
		raw("<p class=\"meta\" id=\"runs\">")
		text(p.Runs)
		raw("</p>\n")
	}
	raw("<div class=\"counters\">")
	for _, c := range p.Counters {
		raw("\n<div class=\"counter\"><span class=\"v\" id=\"")
		text(c.ID)
		raw("\" data-value=\"")
		text(c.Value)
		raw("\">")
		text(c.Text)
		raw("</span><span class=\"l\">")
		text(c.Label)
		raw("</span></div>")
	}
	raw("\n</div>\n<div class=\"charts\">")
	for _, c := range p.Charts {
		raw("\n<figure data-chart=\"")
		text(c.ID)
		raw("\"><figcaption>")
		text(c.Title)
		raw("</figcaption><div class=\"body\">")
		raw(string(c.Body)) // trusted SVG drawn by charts
		raw("</div></figure>")
	}
	raw("\n</div>")
	if p.Results != "" {
		raw("\n")
		raw(string(p.Results)) // built by resultsSection from escaped text
		raw("\n")
		raw(resultsScript)
	}
	if p.Live {
		raw("\n")
		raw(liveScript)
	}
	raw("\n</body>\n</html>\n")
	return bw.Flush()
}

// pageHead is the page up to the live page's additions to the
// Content-Security-Policy.
const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:;`

// pageStyle is the page's style sheet.
const pageStyle = `<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1640px; padding: 0 16px; color: #1d2330; background: #f6f7f9; }
h1 { font-size: 20px; margin: 0 0 4px; }
.meta { color: #5b6475; margin: 0 0 16px; }
.state { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; background: #e3e7ee; }
body[data-state=running] .state { background: #d7ecff; }
.counters { display: flex; flex-wrap: wrap; gap: 10px; margin: 0 0 16px; }
.counter { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 8px 14px; min-width: 90px; }
.counter .v { display: block; font-size: 22px; font-weight: 600; }
.counter .l { color: #5b6475; font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 16px; }
figure { margin: 0; background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px; }
figure[data-chart=timeline] { grid-column: 1 / -1; }
figcaption { font-weight: 600; margin-bottom: 6px; }
svg { width: 100%; height: auto; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: #3a4252; }
svg .label { font-size: 12px; fill: #5b6475; }
svg .note { font-size: 14px; fill: #8a93a3; }
.caption { color: #5b6475; margin: 6px 0 0; font-size: 12px; }
.grid { stroke: #eceef2; } .axis, .tickmark { stroke: #9aa2b1; }
.queue { fill: #c9ced8; } .backoff { fill: #f2b36b; } .inference { fill: #3d7ee0; } .tools { fill: #37a76b; } .total { fill: #9bb4d8; }
.row[data-status=failed] .inference, .row[data-status=failed] .total, .failed-agent { fill: #d9534f; }
.bar { fill: #3d7ee0; } .bar.failed { fill: #d9534f; }
.t-requested { fill: #9aa2b1; } .t-executed { fill: #3d7ee0; } .t-coalesced { fill: #8f6ad8; } .t-cached { fill: #37a76b; }
polyline { stroke-width: 2; }
.s-rate { stroke: #3d7ee0; fill: #3d7ee0; } .s-active { stroke: #37a76b; fill: #37a76b; }
.s-limit { stroke: #1d2330; fill: #1d2330; } polyline.s-limit { stroke-dasharray: 6 3; } .s-inflight { stroke: #3d7ee0; fill: #3d7ee0; } .s-throttles { stroke: #d9534f; fill: #d9534f; }
.s-cost { stroke: #8f6ad8; fill: #8f6ad8; }
.results { margin: 16px 0 0; background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px; }
.results h2 { font-size: 16px; margin: 0 0 4px; }
.controls { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 8px 0; }
.controls input { flex: 1 1 260px; padding: 4px 8px; }
#results-table { width: 100%; border-collapse: collapse; table-layout: fixed; font-size: 12px; }
#results-table th { text-align: left; border-bottom: 1px solid #9aa2b1; padding: 4px; }
#results-table th:nth-child(1) { width: 64px; } #results-table th:nth-child(2) { width: 96px; }
#results-table th:nth-child(n+6) { width: 72px; }
#results-table td { border-bottom: 1px solid #eceef2; padding: 4px; vertical-align: top; overflow: hidden; }
#results-table td.text { font-family: ui-monospace, monospace; cursor: pointer; }
#results-table td.text .clip { white-space: pre-wrap; word-break: break-all; max-height: 4.2em; overflow: hidden; display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical; }
#results-table td.text.open .clip { max-height: none; display: block; }
#results-table td.num { text-align: right; font-variant-numeric: tabular-nums; }
#results-table tr[data-status=failed] td.status, #results-table td.err { color: #b52b27; }
polyline.s-rate, polyline.s-active, polyline.s-limit, polyline.s-inflight, polyline.s-throttles, polyline.s-cost { fill: none; }
</style>`

// liveScript is the live page's script: it swaps in each event's counters
// and charts, fetches the results table's latest rows (GET results) after
// each, and marks the page done after the "done" event.
const liveScript = `<script>
"use strict";
(function () {
  function apply(frame) {
    for (const c of frame.counters) {
      let el = document.getElementById(c.id);
      if (!el) { // a counter that appeared since the page loaded (media tokens)
        const box = document.createElement("div"), l = document.createElement("span");
        box.className = "counter";
        el = document.createElement("span");
        el.className = "v";
        el.id = c.id;
        l.className = "l";
        l.textContent = c.label;
        box.append(el, l);
        const cost = document.getElementById("cost");
        const all = document.querySelector(".counters");
        if (cost && cost.parentNode.parentNode === all) { all.insertBefore(box, cost.parentNode); } else if (all) { all.append(box); }
      }
      el.dataset.value = c.value; el.textContent = c.text;
    }
    for (const ch of frame.charts) {
      const el = document.querySelector('[data-chart="' + ch.id + '"] .body');
      if (el) { el.innerHTML = ch.body; }
    }
  }
  let fetching = false;
  function results() {
    if (fetching || !window.batchagentResults) return;
    fetching = true;
    fetch("results").then(function (r) { return r.json(); })
      .then(function (d) { window.batchagentResults(d); })
      .catch(function () {})
      .finally(function () { fetching = false; });
  }
  const events = new EventSource("events");
  events.addEventListener("sample", function (e) { apply(JSON.parse(e.data)); results(); });
  events.addEventListener("done", function (e) {
    apply(JSON.parse(e.data));
    fetching = false;
    results();
    events.close();
    document.body.dataset.state = "done";
    document.getElementById("state").textContent = "done";
  });
})();
</script>`
