package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// bigRunFailed reports whether agent i of bigRun failed, and its kind.
func bigRunFailed(i int) (bool, job.Kind) {
	if i%33 != 0 {
		return false, ""
	}
	return true, []job.Kind{job.KindTimeout, job.KindTool, job.KindValidation}[(i/33)%3]
}

// bigRun writes a state file of job "big" with n finished agents, 1 in
// 33 failed (timeout, tool, validation in turn), and the samples of two
// runs, through the store's group-commit writer, and returns its path,
// closed.
func bigRun(t testing.TB, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.db")
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.Begin(ctx, "big", checkpoint.Fingerprint{"task": "x"}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.SetInputs(ctx, "big", n); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		saveErr error
	)
	done := func(err error) {
		if err != nil {
			mu.Lock()
			saveErr = err
			mu.Unlock()
		}
		wg.Done()
	}
	for i := range n {
		s := agent.State{JobID: "big", Index: i, Status: agent.StatusDone, Turns: 2, ModelCalls: 2,
			Input:   job.Input{"id": i, "text": fmt.Sprintf("review %06d of the quarterly filing", i)},
			Output:  json.RawMessage(fmt.Sprintf(`{"label":"positive","score":%d}`, i%100)),
			Usage:   llm.Usage{PromptTokens: 300, CompletionTokens: 40},
			Started: start.Add(time.Duration(i) * time.Millisecond), Timings: agent.Timings{Total: 2 * time.Second}}
		if failed, kind := bigRunFailed(i); failed {
			s.Status, s.Output = agent.StatusFailed, nil
			s.Failure = &job.Failure{Kind: kind, Op: "generate", Turn: 1,
				Cause: []job.Link{{Message: fmt.Sprintf("%s error of agent %d", kind, i)}}}
		}
		wg.Add(1)
		st.SaveAsync(&s, done)
	}
	wg.Wait()
	if saveErr != nil {
		t.Fatal(saveErr)
	}
	// Two runs: the second resumed at half way; its engine counts its
	// tokens from zero and its results from the restored ones.
	info := `"info":{"job":"big","model":"sim","price":{"Input":1,"Output":2}}`
	for r, run := range [][2]int{{0, n / 2}, {n / 2, n}} {
		at := start.Add(time.Duration(r) * time.Hour)
		for k := 0; k <= 10; k++ {
			doneN := run[0] + (run[1]-run[0])*k/10
			extra := ""
			if k == 0 {
				extra = "," + info
			}
			data := fmt.Sprintf(`{"t":%d,"done":%d,"ok":%d,"failed":0,"tokens":%d%s}`, k, doneN, doneN,
				340*(doneN-run[0]), extra)
			if err := st.AddSample(ctx, "big", checkpoint.Sample{At: at.Add(time.Duration(k) * time.Second), Data: json.RawMessage(data)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// bigReport loads the report of the state file at path and writes it to
// report.html beside it, returning the report's path and its data.
func bigReport(t testing.TB, path string) (string, *report.Data) {
	t.Helper()
	store, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := report.Load(context.Background(), store, "big")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(filepath.Dir(path), "report.html")
	if err := report.WriteFile(out, d); err != nil {
		t.Fatal(err)
	}
	return out, d
}

// TestBrowserResultsTable opens the report of a 100,000-input run in
// headless Chromium and searches, filters and pages its results table.
func TestBrowserResultsTable(t *testing.T) {
	exe := os.Getenv("BATCHAGENT_TEST_CHROMIUM")
	if exe == "" {
		t.Skip("BATCHAGENT_TEST_CHROMIUM is unset: scripts/test installs chromium and sets it")
	}
	const n = 100_000
	t0 := time.Now()
	path := bigRun(t, n)
	t.Logf("wrote a state file of %d agents in %v", n, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	page, d := bigReport(t, path)
	fi, err := os.Stat(page)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded and wrote the report in %v: %d bytes", time.Since(t0).Round(time.Millisecond), fi.Size())
	if fi.Size() >= 5<<20 {
		t.Errorf("the report is %d bytes, want under 5 MB", fi.Size())
	}
	// The rows shown: the first MaxFailureRows failures by index, then a
	// sample of the others.
	var failures []int
	for i := range n {
		if failed, _ := bigRunFailed(i); failed {
			failures = append(failures, i)
		}
	}
	if got, want := d.Results.Failed, int64(len(failures)); got != want {
		t.Fatalf("Results.Failed = %d, want %d", got, want)
	}
	shownFailures := failures[:report.MaxFailureRows]
	if got := len(d.Results.Rows); got > report.MaxRows || got <= report.MaxFailureRows {
		t.Fatalf("the report shows %d rows, want more than %d and at most %d", got, report.MaxFailureRows, report.MaxRows)
	}
	wantChosen := fmt.Sprintf("%s of 100,000 results: the first 2,500 of %s failures by index, then %s of %s other results sampled evenly by index",
		commas(len(d.Results.Rows)), commas(len(failures)), commas(len(d.Results.Rows)-2500), commas(n-len(failures)))
	if d.Results.Chosen != wantChosen {
		t.Errorf("Results.Chosen = %q, want %q", d.Results.Chosen, wantChosen)
	}

	ctx := newTab(t, exe)
	t0 = time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(`body[data-results="ready"]`)); err != nil {
		t.Fatal(err)
	}
	opened := time.Since(t0)
	timing, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function () {
  const n = performance.getEntriesByType("navigation")[0];
  return [n.domContentLoadedEventEnd, performance.now()];
})()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("opened the report in %v: DOMContentLoaded (table drawn) at %.0f ms on the page's clock", opened.Round(time.Millisecond), timing[0])
	// Again, the browser warm: what a user opening a second report sees.
	t0 = time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(`body[data-results="ready"]`)); err != nil {
		t.Fatal(err)
	}
	t.Logf("opened it again in %v", time.Since(t0).Round(time.Millisecond))

	type state struct {
		Page, Pages, Rows string
		Indexes, Kinds    []string
	}
	read := func() state {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[state](`(function () {
  const p = document.getElementById("results-page"), rows = Array.from(document.querySelectorAll("#results-body tr"));
  return {Page: p.dataset.page, Pages: p.dataset.pages, Rows: p.dataset.rows,
    Indexes: rows.map(r => r.dataset.index), Kinds: rows.map(r => r.dataset.kind || r.dataset.status)};
})()`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	strs := func(is []int) []string {
		out := make([]string, len(is))
		for i, v := range is {
			out[i] = strconv.Itoa(v)
		}
		return out
	}
	// At first: every row shown, the failures first.
	s := read()
	if want := strconv.Itoa(len(d.Results.Rows)); s.Rows != want || s.Page != "1" {
		t.Errorf("at open: rows %s page %s, want rows %s page 1", s.Rows, s.Page, want)
	}
	if want := strs(shownFailures[:50]); fmt.Sprint(s.Indexes) != fmt.Sprint(want) {
		t.Errorf("at open the rows are %v, want the first 50 failures %v", s.Indexes, want)
	}

	// Search: one input's text, typed.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#results-search", "Review 000066 ")); err != nil {
		t.Fatal(err)
	}
	s = read()
	if fmt.Sprint(s.Indexes) != "[66]" || s.Rows != "1" || fmt.Sprint(s.Kinds) != "[validation]" {
		t.Errorf("after searching %q: rows %s %v kinds %v, want the one row 66 (validation)", "Review 000066 ", s.Rows, s.Indexes, s.Kinds)
	}

	// Filter by kind, the search cleared, and page.
	var tools []int
	for _, i := range shownFailures {
		if _, k := bigRunFailed(i); k == job.KindTool {
			tools = append(tools, i)
		}
	}
	err = chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(function () {
  const q = document.getElementById("results-search"), k = document.getElementById("results-kind");
  q.value = ""; q.dispatchEvent(new Event("input"));
  k.value = "kind:tool"; k.dispatchEvent(new Event("change"));
})()`))
	if err != nil {
		t.Fatal(err)
	}
	s = read()
	wantPages := strconv.Itoa((len(tools) + 49) / 50)
	if s.Rows != strconv.Itoa(len(tools)) || s.Pages != wantPages || fmt.Sprint(s.Indexes) != fmt.Sprint(strs(tools[:50])) {
		t.Errorf("filtered by kind tool: rows %s pages %s %v, want rows %d pages %s %v", s.Rows, s.Pages, s.Indexes, len(tools), wantPages, strs(tools[:50]))
	}
	if err := chromedp.Do(ctx, chromedp.Click("#results-next"), chromedp.Click("#results-next")); err != nil {
		t.Fatal(err)
	}
	s = read()
	if s.Page != "3" || fmt.Sprint(s.Indexes) != fmt.Sprint(strs(tools[100:150])) {
		t.Errorf("page 3 of kind tool: page %s rows %v, want %v", s.Page, s.Indexes, strs(tools[100:150]))
	}
	for _, k := range s.Kinds {
		if k != "tool" {
			t.Errorf("filtered by kind tool, a row of kind %q is shown", k)
			break
		}
	}
	// The whole job's counters, and the runs named.
	facts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.getElementById("tokens").dataset.value,
  document.getElementById("progress").textContent, (document.getElementById("runs") || {}).textContent || ""]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(340 * n); facts[0] != want {
		t.Errorf("tokens = %s, want %s", facts[0], want)
	}
	if facts[1] != "100.0%" {
		t.Errorf("progress = %q, want 100.0%%", facts[1])
	}
	if !strings.Contains(facts[2], "its 2 runs") {
		t.Errorf("runs = %q, want it to say the report covers 2 runs", facts[2])
	}
	png := screenshot(t, ctx)
	t.Logf("screenshot: %s", png)
}

// commas formats n with thousands separators.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// newTab starts headless Chromium at exe and returns its tab's context;
// the test fails on an uncaught exception in the page. The browser stops
// when the test ends.
func newTab(t *testing.T, exe string) context.Context {
	t.Helper()
	profile := filepath.Join(t.TempDir(), "profile")
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(profile), chromedp.WindowSize(1400, 1000))
	var mu sync.Mutex
	var errs []string
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			errs = append(errs, ev.ExceptionDetails.Text)
			mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		mu.Lock()
		for _, e := range errs {
			t.Errorf("the page threw: %s", e)
		}
		mu.Unlock()
		cancelTab()
		cancelAlloc()
		// Chromium's helpers may write the profile a moment after the
		// browser stops.
		for range 50 {
			if err := os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	return ctx
}

// screenshot saves a full-page PNG of the tab in BATCHAGENT_TEST_ARTIFACTS,
// else in the test's temporary directory, and returns its path.
func screenshot(t *testing.T, ctx context.Context) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("BATCHAGENT_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "report-results.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
