package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/internal/cli"
)

// pageFacts is what the browser reads off a report or live page.
type pageFacts struct {
	Done, OK, Failed string
	State            string
	Charts           []string // data-chart of each chart drawn with a non-empty SVG
	Rows             int      // timeline rows
	Agents           string   // the timeline's data-agents
	Kinds            map[string]int
	Tools            map[string]map[string]int
	LimitCaption     string
}

// factsJS reads pageFacts in the page.
const factsJS = `(() => {
  const v = id => { const e = document.getElementById(id); return e ? e.dataset.value : ""; };
  const kinds = {};
  document.querySelectorAll('[data-chart=errors] [data-kind]').forEach(e => { kinds[e.dataset.kind] = +e.dataset.value; });
  const tools = {};
  document.querySelectorAll('[data-chart=tools] [data-tool]').forEach(g => {
    const m = {};
    g.querySelectorAll('[data-stat]').forEach(r => { m[r.dataset.stat] = +r.dataset.value; });
    tools[g.dataset.tool] = m;
  });
  const charts = [...document.querySelectorAll('[data-chart]')].filter(f => {
    const s = f.querySelector('svg');
    return s && s.getBoundingClientRect().width > 0 && s.getBoundingClientRect().height > 0;
  }).map(f => f.dataset.chart);
  const rows = document.querySelector('[data-chart=timeline] .rows');
  return {Done: v('done'), OK: v('ok'), Failed: v('failed'), State: document.body.dataset.state, Charts: charts,
    Rows: document.querySelectorAll('[data-chart=timeline] .row').length, Agents: rows ? rows.dataset.agents : "",
    Kinds: kinds, Tools: tools, LimitCaption: document.querySelector('[data-chart=limit] .caption').textContent};
})()`

var allCharts = []string{"timeline", "throughput", "agents", "limit", "ttft", "queue", "latency", "errors", "tools", "cost"}

// reviewInputs writes n inputs for the review example: its files, round
// robin.
func reviewInputs(t *testing.T, dir string, n int) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/review/files.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Split(strings.TrimSpace(string(b)), "\n")
	var in strings.Builder
	for i := range n {
		in.WriteString(files[i%len(files)] + "\n")
	}
	return writeFile(t, dir, "in.jsonl", in.String())
}

// TestReportInBrowser runs the review example on the simulator with
// injected failures, writes its report, and opens it from file:// in
// Chromium: no console errors, no request but the file itself, every chart
// drawn, and the numbers of the output.
func TestReportInBrowser(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	in := reviewInputs(t, dir, 60)
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", "../../examples/review/job.yaml", "--inputs", in, "--out", out,
		"--backend", "sim://?latency=15ms&tool_turns=1&seed=7&invalid=0.8&fail=0.5", "--quiet")
	if code != 0 && code != 1 {
		t.Fatalf("run: exit %d, stderr:\n%s", code, stderr)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(text))
	kinds := map[string]int{}
	ok, toolCalls := 0, 0
	for _, l := range lines {
		toolCalls += l.ToolCalls
		if l.Error != nil {
			kinds[l.Error.Kind]++
		} else {
			ok++
		}
	}
	if len(kinds) == 0 {
		t.Fatalf("no failures among %d lines: the test needs some to check the errors chart", len(lines))
	}
	html := filepath.Join(dir, "report.html")
	code, _, stderr = run(t, t.Context(), "report", out+".state.db", "--out", html)
	if code != 0 {
		t.Fatalf("report: exit %d, stderr:\n%s", code, stderr)
	}

	url := "file://" + html
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url), chromedp.WaitVisible(`[data-chart=timeline] svg`)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	f, err := chromedp.Run(b.ctx, chromedp.Evaluate[pageFacts](factsJS))
	if err != nil {
		t.Fatal(err)
	}
	b.screenshot(t, "report")
	b.check(t, url, "data:")
	if n := b.requestCount(); n != 1 {
		t.Errorf("the page made %d requests, want 1 (itself)", n)
	}
	if diff := cmp.Diff(allCharts, f.Charts); diff != "" {
		t.Errorf("charts drawn (-want +got):\n%s", diff)
	}
	if want := fmt.Sprint(len(lines)); f.Done != want || f.Agents != want {
		t.Errorf("done counter %s, timeline of %s agents; want %s, the result lines", f.Done, f.Agents, want)
	}
	if f.OK != fmt.Sprint(ok) || f.Failed != fmt.Sprint(len(lines)-ok) {
		t.Errorf("ok %s, failed %s; want %d and %d", f.OK, f.Failed, ok, len(lines)-ok)
	}
	if f.Rows != min(len(lines), 300) {
		t.Errorf("timeline rows = %d, want %d", f.Rows, min(len(lines), 300))
	}
	if diff := cmp.Diff(kinds, f.Kinds); diff != "" {
		t.Errorf("error bars by kind (-output +page):\n%s", diff)
	}
	// The tool counters and the limit come from the samples the run
	// recorded in its state file.
	if rf := f.Tools["read_file"]; rf["requested"] != toolCalls || rf["executed"]+rf["coalesced"]+rf["cached"] != toolCalls {
		t.Errorf("read_file bars = %v, want %d requested, each executed, coalesced or cached", rf, toolCalls)
	}
	if f.LimitCaption == "" || strings.HasPrefix(f.LimitCaption, "not recorded") {
		t.Errorf("limit chart caption = %q, want the recorded limit", f.LimitCaption)
	}
}

// liveAddr matches the line run --ui prints.
var liveAddr = regexp.MustCompile(`live view at (http://\S+/)`)

// TestLiveViewInBrowser runs a job with --ui and watches the live page in
// Chromium: the done counter rises while the run goes, equals the result
// lines at the end, and the page keeps serving the final state after the
// run; no console errors and no request outside the live view's server.
func TestLiveViewInBrowser(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	in := reviewInputs(t, dir, 64)
	out := filepath.Join(dir, "out.jsonl")
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	codec := make(chan int, 1)
	go func() { // ends when ctx ends the lingering view
		codec <- cli.Main(ctx, []string{"run", "../../examples/review/job.yaml", "--inputs", in, "--out", out,
			"--backend", "sim://?latency=250ms&tool_turns=1&seed=3", "--ui", "127.0.0.1:0", "--ui-linger", "2m", "--quiet"},
			&bytes.Buffer{}, &stderr)
	}()
	var url string
	waitUntil(t, "the live view's address", func() bool {
		m := liveAddr.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	// Record every value the done counter takes, from the page's load on.
	const watch = `(() => {
  const el = document.getElementById('done');
  window.seen = [el.dataset.value];
  new MutationObserver(() => window.seen.push(el.dataset.value)).observe(el, {attributes: true, attributeFilter: ['data-value']});
  return true;
})()`
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url), chromedp.WaitReady(`#done`), chromedp.Evaluate[chromedp.Void](watch)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`document.body.dataset.state === "done"`, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("waiting for the run's done state: %v; stderr:\n%s", err, stderr.String())
	}
	seen, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`window.seen`))
	if err != nil {
		t.Fatal(err)
	}
	final, err := chromedp.Run(b.ctx, chromedp.Evaluate[pageFacts](factsJS))
	if err != nil {
		t.Fatal(err)
	}
	b.screenshot(t, "live")

	// The page keeps working after the run: loaded again, it shows the
	// final state.
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url), chromedp.WaitVisible(`[data-chart=timeline] svg`)); err != nil {
		t.Fatalf("open %s after the run: %v", url, err)
	}
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`document.body.dataset.state === "done"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page after the run is not done: %v", err)
	}
	after, err := chromedp.Run(b.ctx, chromedp.Evaluate[pageFacts](factsJS))
	if err != nil {
		t.Fatal(err)
	}
	b.check(t, url, "data:")

	cancel()
	if code := <-codec; code != 0 {
		t.Errorf("run --ui: exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n := fmt.Sprint(len(readLines(t, string(text))))
	if n != "64" || final.Done != n || after.Done != n {
		t.Errorf("result lines %s, done counter %s at the end and %s after; want 64 each", n, final.Done, after.Done)
	}
	distinct := slices.Compact(slices.Clone(seen))
	if len(distinct) < 3 || distinct[len(distinct)-1] != n {
		t.Errorf("the done counter went %v, want it to rise in steps while the run goes and end at %s", seen, n)
	}
	for i := 1; i < len(seen); i++ {
		var a, c int
		fmt.Sscan(seen[i-1], &a)
		fmt.Sscan(seen[i], &c)
		if c < a {
			t.Errorf("the done counter fell from %d to %d", a, c)
		}
	}
	if diff := cmp.Diff(allCharts, after.Charts); diff != "" {
		t.Errorf("charts drawn after the run (-want +got):\n%s", diff)
	}
	if after.Rows != 64 {
		t.Errorf("timeline rows after the run = %d, want 64", after.Rows)
	}
}
