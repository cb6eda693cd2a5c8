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
	hostileRun.Runs = []Run{{Start: hostileRun.Start, End: hostileRun.Start.Add(time.Minute)},
		{Start: hostileRun.Start.Add(time.Hour), End: hostileRun.Start.Add(2 * time.Hour)}}
	hostileRun.Results = &Results{Rows: []Row{{Index: 1, Status: "failed", Kind: hostile, Error: hostile, Input: hostile, Cost: -1}},
		Total: 9, Failed: 3, Chosen: hostile}
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
// writeTo, kept (its static style sheet and script aside) as the
// reference writeTo must match byte for byte. It lives in a test file: outside tests nothing executes a
// template, which keeps text/template's evaluator out of the binary.
var oldPageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	// The style sheet and the scripts are static text, the same
	// constants writeTo writes; the results section is trusted HTML that
	// resultsSection builds from escaped text.
	"style":   func() template.HTML { return template.HTML(pageStyle) },
	"script":  func() template.HTML { return template.HTML(liveScript) },
	"results": func() template.HTML { return template.HTML(resultsScript) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'unsafe-inline';{{if .Live}} connect-src 'self';{{end}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
{{style}}
</head>
<body data-state="{{.State}}">
<h1>{{.Info.Job}}</h1>
<p class="meta">{{if .Info.Model}}model {{.Info.Model}} · {{end}}{{if .Start}}started {{.Start}} · {{end}}<span class="state" id="state">{{.State}}</span></p>
{{if .Runs}}<p class="meta" id="runs">{{.Runs}}</p>
{{end}}<div class="counters">
{{- range .Counters}}
<div class="counter"><span class="v" id="{{.ID}}" data-value="{{.Value}}">{{.Text}}</span><span class="l">{{.Label}}</span></div>
{{- end}}
</div>
<div class="charts">
{{- range .Charts}}
<figure data-chart="{{.ID}}"><figcaption>{{.Title}}</figcaption><div class="body">{{.Body}}</div></figure>
{{- end}}
</div>
{{- if .Results}}
{{.Results}}
{{results}}
{{- end}}
{{- if .Live}}
{{script}}
{{- end}}
</body>
</html>
`))
