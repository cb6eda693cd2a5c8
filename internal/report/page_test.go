package report_test

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// render writes d's report and parses it back.
func render(t *testing.T, d *report.Data) (*html.Node, string) {
	t.Helper()
	var b bytes.Buffer
	if err := report.Write(&b, d); err != nil {
		t.Fatalf("Write: %v", err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("parse the report: %v", err)
	}
	return doc, b.String()
}

// attr returns n's attribute key, or "".
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// find returns the elements under n for which match holds, in document
// order.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && match(c) {
			out = append(out, c)
		}
	}
	return out
}

// byAttr matches elements whose attribute key is val ("" for any value).
func byAttr(key, val string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		for _, a := range n.Attr {
			if a.Key == key && (val == "" || a.Val == val) {
				return true
			}
		}
		return false
	}
}

// text returns the text under n.
func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// chartOf returns the figure with data-chart id.
func chartOf(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	fs := find(doc, byAttr("data-chart", id))
	if len(fs) != 1 {
		t.Fatalf("found %d elements with data-chart=%q, want 1", len(fs), id)
	}
	return fs[0]
}

// caption returns the caption text of chart id.
func caption(t *testing.T, doc *html.Node, id string) string {
	t.Helper()
	cs := find(chartOf(t, doc, id), byAttr("class", "caption"))
	if len(cs) != 1 {
		t.Fatalf("chart %s has %d captions, want 1", id, len(cs))
	}
	return text(cs[0])
}

var chartIDs = []string{"timeline", "throughput", "limit", "ttft", "latency", "errors", "tools", "cost"}

// sampleData is a small run: n agents of 2 turns each, 1 in 4 failed.
func sampleData(n int) *report.Data {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	d := &report.Data{
		Info:   report.Info{Job: "review", Model: "m", Price: &llm.Price{Input: 1, Output: 2}, PriceSource: "file"},
		Start:  start,
		End:    start.Add(time.Duration(n+10) * time.Second),
		Totals: report.Totals{Inputs: n, ByKind: map[string]int64{}},
		Tools:  []tool.Stats{{Name: "read_file", Requested: 10, Executed: 6, Coalesced: 3, CacheHits: 1}},
	}
	for i := range n {
		a := report.Agent{Index: i, Status: "done", Started: start.Add(time.Duration(i) * time.Second),
			Total: 4 * time.Second, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 10}}
		if i%4 == 3 {
			a.Status, a.Kind = "failed", "timeout"
			d.Totals.Failed++
			d.Totals.ByKind["timeout"]++
		} else {
			d.Totals.OK++
		}
		d.Totals.Done++
		d.Totals.Usage = d.Totals.Usage.Add(a.Usage)
		for turn := range 2 {
			a.Spans = append(a.Spans, report.Span{Turn: turn, Start: a.Started.Add(time.Duration(turn) * 2 * time.Second),
				Queue: 100 * time.Millisecond, Inference: time.Second, TTFT: 300 * time.Millisecond, Tools: 500 * time.Millisecond})
		}
		d.Agents = append(d.Agents, a)
	}
	for s := range 11 {
		d.Samples = append(d.Samples, report.Sample{T: float64(s), Done: int64(s * n / 10), Active: 3, Inflight: 2, Limit: 8, Throttles: int64(s / 3)})
	}
	return d
}

func TestWriteEscapesHostileText(t *testing.T) {
	t.Parallel()
	const hostile = `</script><img src=x onerror=alert(1)>"'&`
	d := sampleData(4)
	d.Info.Job = hostile
	d.Info.Model = hostile
	d.Totals.ByKind = map[string]int64{hostile: 2}
	d.Agents[3].Kind = hostile
	d.Tools[0].Name = `<svg onload=alert(1)>`
	doc, out := render(t, d)
	if imgs := find(doc, func(n *html.Node) bool { return n.Data == "img" }); len(imgs) > 0 {
		t.Errorf("the report holds %d img elements made of user text", len(imgs))
	}
	if on := find(doc, func(n *html.Node) bool { return attr(n, "onload") != "" || attr(n, "onerror") != "" }); len(on) > 0 {
		t.Errorf("the report holds %d elements with event handlers made of user text", len(on))
	}
	if scripts := find(doc, func(n *html.Node) bool { return n.Data == "script" }); len(scripts) > 0 {
		t.Errorf("the report holds %d scripts, want none", len(scripts))
	}
	if h1 := find(doc, func(n *html.Node) bool { return n.Data == "h1" }); len(h1) != 1 || text(h1[0]) != hostile {
		t.Errorf("the heading does not show the job's name as text: %q", out[:min(len(out), 200)])
	}
	kinds := find(chartOf(t, doc, "errors"), byAttr("data-kind", hostile))
	if len(kinds) != 1 || attr(kinds[0], "data-value") != "2" {
		t.Errorf("errors chart: %d bars of the hostile kind, want 1 with data-value 2", len(kinds))
	}
	if tools := find(chartOf(t, doc, "tools"), byAttr("data-tool", `<svg onload=alert(1)>`)); len(tools) != 1 {
		t.Errorf("tools chart: %d groups of the hostile tool, want 1", len(tools))
	}
}

func TestWriteNoExternalReferences(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, sampleData(20))
	for _, n := range find(doc, func(*html.Node) bool { return true }) {
		for _, key := range []string{"src", "href", "action", "xlink:href"} {
			if v := attr(n, key); v != "" && v != "data:," {
				t.Errorf("<%s %s=%q>: the report refers outside itself", n.Data, key, v)
			}
		}
		if n.Data == "link" && attr(n, "rel") != "icon" {
			t.Errorf("<link rel=%q>: want no link but the empty icon", attr(n, "rel"))
		}
	}
	csp := find(doc, byAttr("http-equiv", "Content-Security-Policy"))
	if len(csp) != 1 || !strings.HasPrefix(attr(csp[0], "content"), "default-src 'none'") {
		t.Errorf("the report has no Content-Security-Policy forbidding loads")
	}
}

func TestWriteEmpty(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, &report.Data{Totals: report.Totals{Inputs: -1}})
	for _, id := range chartIDs {
		if svgs := find(chartOf(t, doc, id), func(n *html.Node) bool { return n.Data == "svg" }); len(svgs) != 1 {
			t.Errorf("chart %s has %d svg elements, want 1", id, len(svgs))
		}
	}
	for id, want := range map[string]string{"done": "0", "failed": "0", "inputs": "-1"} {
		el := find(doc, byAttr("id", id))
		if len(el) != 1 || attr(el[0], "data-value") != want {
			t.Errorf("counter %s: want one with data-value %s", id, want)
		}
	}
	checks := map[string]string{"timeline": "no agents", "limit": "not recorded", "errors": "no failures", "ttft": "none recorded", "cost": "cost unknown"}
	for id, want := range checks {
		if got := caption(t, doc, id); !strings.Contains(got, want) {
			t.Errorf("chart %s caption = %q, want it to contain %q", id, got, want)
		}
	}
}

func TestWriteOneAgent(t *testing.T) {
	t.Parallel()
	d := sampleData(1)
	doc, _ := render(t, d)
	rows := find(chartOf(t, doc, "timeline"), byAttr("class", "row"))
	if len(rows) != 1 {
		t.Fatalf("timeline has %d rows, want 1", len(rows))
	}
	classes := map[string]int{}
	for _, r := range find(rows[0], func(n *html.Node) bool { return n.Data == "rect" }) {
		classes[attr(r, "class")]++
		if w, err := strconv.ParseFloat(attr(r, "width"), 64); err != nil || w <= 0 {
			t.Errorf("segment %s width %q, want > 0", attr(r, "class"), attr(r, "width"))
		}
	}
	// Two turns, each queue, inference and tools (no backoff).
	if classes["queue"] != 2 || classes["inference"] != 2 || classes["tools"] != 2 || classes["backoff"] != 0 {
		t.Errorf("timeline segments by class = %v, want queue, inference and tools 2 each", classes)
	}
	if got := caption(t, doc, "timeline"); got != "1 agents" {
		t.Errorf("timeline caption = %q, want %q", got, "1 agents")
	}
	var ttft int
	for _, b := range find(chartOf(t, doc, "ttft"), byAttr("data-value", "")) {
		n, _ := strconv.Atoi(attr(b, "data-value"))
		ttft += n
	}
	if ttft != 2 {
		t.Errorf("TTFT histogram counts %d turns, want 2", ttft)
	}
	if got, want := caption(t, doc, "cost"), fmt.Sprintf("$%.4f", 0.00012); !strings.Contains(got, want) {
		t.Errorf("cost caption = %q, want it to contain %q (100 prompt tokens at $1/M, 10 completion at $2/M)", got, want)
	}
}

func TestTimelineSamplesLargeRuns(t *testing.T) {
	t.Parallel()
	const n = 100_000
	d := sampleData(0)
	d.End = d.Start.Add(time.Hour)
	for i := range n {
		d.Agents = append(d.Agents, report.Agent{Index: i, Status: "done", Started: d.Start.Add(time.Duration(i) * 30 * time.Millisecond), Total: time.Second})
	}
	doc, out := render(t, d)
	tl := chartOf(t, doc, "timeline")
	rows := find(tl, byAttr("class", "row"))
	if len(rows) != report.MaxTimelineRows {
		t.Fatalf("timeline has %d rows, want %d", len(rows), report.MaxTimelineRows)
	}
	for i, r := range rows {
		if got, want := attr(r, "data-index"), strconv.Itoa(i*n/report.MaxTimelineRows); got != want {
			t.Fatalf("row %d is agent %s, want %s (sampled evenly by index)", i, got, want)
		}
	}
	g := find(tl, byAttr("class", "rows"))
	if len(g) != 1 || attr(g[0], "data-agents") != "100000" || attr(g[0], "data-rows") != "300" {
		t.Errorf("timeline's rows group: want data-rows 300 and data-agents 100000")
	}
	if got := caption(t, doc, "timeline"); got != "300 of 100000 agents, sampled evenly by index" {
		t.Errorf("timeline caption = %q", got)
	}
	if len(out) > 2<<20 {
		t.Errorf("the report of 100000 agents is %d bytes, want under 2 MiB", len(out))
	}
}

func TestErrorBarsByKind(t *testing.T) {
	t.Parallel()
	d := sampleData(8)
	d.Totals.ByKind = map[string]int64{"timeout": 3, "validation": 5, "backend": 3}
	doc, _ := render(t, d)
	var got []string
	for _, k := range find(chartOf(t, doc, "errors"), byAttr("data-kind", "")) {
		got = append(got, attr(k, "data-kind")+"="+attr(k, "data-value"))
	}
	want := "validation=5 backend=3 timeout=3" // most first, then by name
	if strings.Join(got, " ") != want {
		t.Errorf("error bars = %q, want %q", strings.Join(got, " "), want)
	}
}

func TestWithoutSamples(t *testing.T) {
	t.Parallel()
	d := sampleData(40)
	d.Samples = nil
	doc, _ := render(t, d)
	if got := caption(t, doc, "limit"); !strings.HasPrefix(got, "not recorded") {
		t.Errorf("limit caption = %q, want it to start with %q", got, "not recorded")
	}
	// Throughput and in-flight come from the agents' start and end times.
	if got := caption(t, doc, "throughput"); !strings.HasPrefix(got, "40 results") {
		t.Errorf("throughput caption = %q, want it to start with %q", got, "40 results")
	}
	lines := find(chartOf(t, doc, "throughput"), byAttr("data-series", "active"))
	if len(lines) != 1 || attr(lines[0], "data-last") != "0" {
		t.Errorf("agents in flight: want one line ending at 0 (all agents done)")
	}
	// Cost over time from the agents' tokens as they ended.
	cost := find(chartOf(t, doc, "cost"), byAttr("data-series", "cost"))
	total, _ := d.Cost()
	if len(cost) != 1 {
		t.Fatalf("cost chart has %d lines, want 1", len(cost))
	}
	if last, err := strconv.ParseFloat(attr(cost[0], "data-last"), 64); err != nil || math.Abs(last-total) > 1e-12 {
		t.Errorf("cost line ends at %q, want the total %v", attr(cost[0], "data-last"), total)
	}
}

// TestWriteMediaTokens: a run that sent media shows their tokens as a
// counter of their own; a text-only run has none.
func TestWriteMediaTokens(t *testing.T) {
	t.Parallel()
	d := sampleData(4)
	doc, _ := render(t, d)
	if got := find(doc, byAttr("id", "media-tokens")); len(got) != 0 {
		t.Errorf("a text-only run shows %d media token counters, want none", len(got))
	}
	d.Totals.Usage.MediaTokens = 3060 // four 1024×1024 images, OpenAI's 765 each
	doc, _ = render(t, d)
	got := find(doc, byAttr("id", "media-tokens"))
	if len(got) != 1 {
		t.Fatalf("found %d media token counters, want 1", len(got))
	}
	if v, txt := attr(got[0], "data-value"), text(got[0]); v != "3060" || txt != "3060" {
		t.Errorf("media tokens counter = %q (data-value %q), want 3060 (3060)", txt, v)
	}
	if l := text(got[0].Parent); !strings.Contains(l, "media tokens") {
		t.Errorf("media tokens counter reads %q, want its label", l)
	}
}
