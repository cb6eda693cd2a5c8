package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium driven through chromedp for one test,
// recording the page's console errors and network requests.
type browser struct {
	ctx context.Context // the tab's: pass to chromedp.Run and Do

	mu       sync.Mutex // protects the fields below
	errs     []string   // console errors, uncaught exceptions, error log entries
	requests []string   // the URL of every request the page made
}

// newBrowser starts Chromium from BATCHAGENT_TEST_CHROMIUM, which
// scripts/test sets (installing chromium when absent); the test is skipped
// when it is unset. The browser stops when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := os.Getenv("BATCHAGENT_TEST_CHROMIUM")
	if exe == "" {
		t.Skip("BATCHAGENT_TEST_CHROMIUM is unset: scripts/test installs chromium and sets it")
	}
	profile := filepath.Join(t.TempDir(), "profile")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(b.event))
	b.ctx = ctx
	t.Cleanup(func() {
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
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	return b
}

// event records what the page reports. It runs on chromedp's reading
// goroutine, so it only appends.
func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		b.errs = append(b.errs, "exception: "+ev.ExceptionDetails.Text)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			b.errs = append(b.errs, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, ev.Request.URL)
	}
}

// check fails the test for any console error seen so far, and for any
// request to a URL that none of allowed prefixes starts.
func (b *browser) check(t *testing.T, allowed ...string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		t.Errorf("browser console: %s", e)
	}
	for _, u := range b.requests {
		ok := false
		for _, p := range allowed {
			ok = ok || strings.HasPrefix(u, p)
		}
		if !ok {
			t.Errorf("the page requested %s, outside %v", u, allowed)
		}
	}
}

// requestCount returns how many requests the page has made.
func (b *browser) requestCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.requests)
}

// screenshot saves a full-page PNG of the page as name.png in
// BATCHAGENT_TEST_ARTIFACTS, else in the test's temporary directory, and
// logs its path.
func (b *browser) screenshot(t *testing.T, name string) string {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("BATCHAGENT_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}
