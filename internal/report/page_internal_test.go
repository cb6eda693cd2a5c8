package report

import (
	"bytes"
	"html/template"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// finishedRun is a run of n agents of one turn each, 1 in 3 failed with
// kind, its one tool named toolName, its price known.
func finishedRun(n int, job, model, kind, toolName string) *Data {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	d := &Data{
		Info:   Info{Job: job, Model: model, Price: &llm.Price{Input: 1.5, Output: 2}, PriceSource: "file"},
		Start:  start,
		End:    start.Add(time.Duration(n+5) * time.Second),
		Totals: Totals{Inputs: n, ByKind: map[string]int64{}, ModelCalls: int64(n)},
		Tools:  []tool.Stats{{Name: toolName, Requested: 7, Executed: 4, Coalesced: 2, CacheHits: 1}},
		Done:   true,
	}
	for i := range n {
		a := Agent{Index: i, Status: "done", Started: start.Add(time.Duration(i) * time.Second), Total: 3 * time.Second,
			TTFT: 200 * time.Millisecond, Usage: llm.Usage{PromptTokens: 120, CompletionTokens: 30}}
		if i%3 == 2 {
			a.Status, a.Kind = "failed", kind
			d.Totals.Failed++
			d.Totals.ByKind[kind]++
		} else {
			d.Totals.OK++
		}
		d.Totals.Done++
		d.Totals.Usage = d.Totals.Usage.Add(a.Usage)
		a.Spans = []Span{{Start: a.Started, Queue: 50 * time.Millisecond, Inference: 2 * time.Second,
			TTFT: 200 * time.Millisecond, Backoff: 100 * time.Millisecond, Tools: 600 * time.Millisecond}}
		d.Agents = append(d.Agents, a)
	}
	return d
}

// matchTemplate writes p with the hand-written renderer and with the template it
// replaced, and fails unless the bytes are equal.
func matchTemplate(t *testing.T, p page) {
	t.Helper()
	var got, want bytes.Buffer
	if err := p.writeTo(&got); err != nil {
		t.Fatalf("writeTo: %v", err)
	}
	if err := oldPageTemplate.Execute(&want, p); err != nil {
		t.Fatalf("the old template: %v", err)
	}
	if g, w := got.String(), want.String(); g != w {
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		t.Fatalf("the page differs from the template's at byte %d of %d (template %d):\ngot  %q\nwant %q",
			i, len(g), len(w), g[max(0, i-80):min(len(g), i+80)], w[max(0, i-80):min(len(w), i+80)])
	}
}

func TestPageMatchesTemplate(t *testing.T) {
	t.Parallel()
	const hostile = `</title><script>alert('x')</script> "a+b" & <b>ü日本</b>` + "\x00\xff\uFFFD\uFDD0"
	running := finishedRun(12, "live job", "m", "timeout", "read_file")
	running.Done = false
	running.Totals.Running = 3
	running.Agents = append(running.Agents, Agent{Index: 12, Status: "running", Started: running.Start.Add(time.Second)})
	for s := range 6 {
		running.Samples = append(running.Samples, Sample{T: float64(s), Done: int64(2 * s), OK: int64(s), Failed: int64(s),
			Active: 3, Inflight: 2, Limit: 8, Throttles: int64(s / 2), Tokens: int64(100 * s), Cost: 0.001 * float64(s)})
	}
	hostileRun := finishedRun(9, hostile, hostile, hostile, hostile)
	hostileRun.Info.PriceSource = hostile
	unknown := finishedRun(4, "no price", "", "rate_limited", "fetch")
	unknown.Info.Price = nil
	unknown.Totals.Inputs = -1
	unknown.Start = time.Time{}
	tests := []struct {
		name string
		d    *Data
	}{
		{"empty", &Data{}},
		{"empty unknown inputs", &Data{Totals: Totals{Inputs: -1}}},
		{"finished", finishedRun(30, "review", "gpt-x", "timeout", "read_file")},
		{"running", running},
		{"hostile text", hostileRun},
		{"unknown inputs, start and cost", unknown},
	}
	for _, tt := range tests {
		for _, live := range []bool{false, true} {
			name := tt.name
			if live {
				name += " live"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				matchTemplate(t, newPage(tt.d, live))
			})
		}
	}
}

func FuzzPageMatchesTemplate(f *testing.F) {
	f.Add("review", "gpt-x", "timeout", "read_file")
	f.Add("", "", "", "")
	f.Add(`<script>"'&+`, "ü日本\u00a0", "\x00\xff\xfe", `</title>`)
	f.Add("a\uFFFDb\uFDD0", "\u2028\u2029", "&#34;", "{{.Title}}")
	f.Fuzz(func(t *testing.T, job, model, kind, toolName string) {
		d := finishedRun(4, job, model, kind, toolName)
		matchTemplate(t, newPage(d, false))
		d.Done = false
		matchTemplate(t, newPage(d, true))
	})
}

// oldPageTemplate is the html/template the page was drawn with before
// writeTo, kept verbatim as the reference writeTo must match byte for
// byte. It lives in a test file: outside tests nothing executes a
// template, which keeps text/template's evaluator out of the binary.
var oldPageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:;{{if .Live}} script-src 'unsafe-inline'; connect-src 'self';{{end}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
<style>
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
polyline.s-rate, polyline.s-active, polyline.s-limit, polyline.s-inflight, polyline.s-throttles, polyline.s-cost { fill: none; }
</style>
</head>
<body data-state="{{.State}}">
<h1>{{.Info.Job}}</h1>
<p class="meta">{{if .Info.Model}}model {{.Info.Model}} · {{end}}{{if .Start}}started {{.Start}} · {{end}}<span class="state" id="state">{{.State}}</span></p>
<div class="counters">
{{- range .Counters}}
<div class="counter"><span class="v" id="{{.ID}}" data-value="{{.Value}}">{{.Text}}</span><span class="l">{{.Label}}</span></div>
{{- end}}
</div>
<div class="charts">
{{- range .Charts}}
<figure data-chart="{{.ID}}"><figcaption>{{.Title}}</figcaption><div class="body">{{.Body}}</div></figure>
{{- end}}
</div>
{{- if .Live}}
<script>
"use strict";
(function () {
  function apply(frame) {
    for (const c of frame.counters) {
      const el = document.getElementById(c.id);
      if (el) { el.dataset.value = c.value; el.textContent = c.text; }
    }
    for (const ch of frame.charts) {
      const el = document.querySelector('[data-chart="' + ch.id + '"] .body');
      if (el) { el.innerHTML = ch.body; }
    }
  }
  const events = new EventSource("events");
  events.addEventListener("sample", function (e) { apply(JSON.parse(e.data)); });
  events.addEventListener("done", function (e) {
    apply(JSON.parse(e.data));
    events.close();
    document.body.dataset.state = "done";
    document.getElementById("state").textContent = "done";
  });
})();
</script>
{{- end}}
</body>
</html>
`))
