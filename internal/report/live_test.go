package report_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// event is one server-sent event.
type event struct {
	name string
	data struct {
		Counters []struct{ ID, Value string }
		Charts   []struct{ ID, Body string }
	}
}

// readEvent reads the next event of r.
func readEvent(t *testing.T, r *bufio.Reader) (event, error) {
	t.Helper()
	var ev event
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				t.Fatalf("event data: %v", err)
			}
		}
	}
}

// counter returns the value of counter id in ev.
func (ev event) counter(id string) string {
	for _, c := range ev.data.Counters {
		if c.ID == id {
			return c.Value
		}
	}
	return ""
}

// liveRun is a Sampler over a fake engine, served by Live on a test
// server; stop ends the run.
func liveRun(t *testing.T) (*fakeEngine, *report.Sampler, *httptest.Server, func()) {
	t.Helper()
	e := new(fakeEngine)
	s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats, Interval: 10 * time.Millisecond, Inputs: 10,
		Info: report.Info{Job: "live"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	srv := httptest.NewServer(report.NewLive(s))
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}
	t.Cleanup(func() { stop(); srv.Close() })
	return e, s, srv, stop
}

func TestLiveStreamsUntilDone(t *testing.T) {
	t.Parallel()
	e, s, srv, stop := liveRun(t)
	page, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(page.Body)
	page.Body.Close()
	for _, id := range chartIDs {
		if !strings.Contains(string(b), `data-chart="`+id+`"`) {
			t.Errorf("the live page has no chart %s", id)
		}
	}
	if !strings.Contains(string(b), `new EventSource("events")`) || !strings.Contains(string(b), `data-state="running"`) {
		t.Errorf("the live page has no event script or is not running")
	}

	resp, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("events Content-Type = %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	first, err := readEvent(t, r)
	if err != nil || first.name != "sample" || first.counter("done") != "0" {
		t.Fatalf("first event = %q done %q (%v), want a sample with done 0", first.name, first.counter("done"), err)
	}
	for i := range 3 {
		s.Result(batchagent.Result{Index: i, Timings: job.Timings{Total: time.Second}})
	}
	e.done.Store(3)
	for {
		ev, err := readEvent(t, r)
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		if ev.counter("done") == "3" {
			break
		}
	}
	stop()
	var last event
	for {
		ev, err := readEvent(t, r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		last = ev
	}
	if last.name != "done" || last.counter("done") != "3" || last.counter("running") != "7" {
		t.Fatalf("last event = %q with done %q, running %q; want done with 3 and 7", last.name, last.counter("done"), last.counter("running"))
	}
	for _, c := range last.data.Charts {
		if c.ID == "timeline" && strings.Count(c.Body, `class="row"`) != 3 {
			t.Errorf("the done event's timeline has %d rows, want 3", strings.Count(c.Body, `class="row"`))
		}
	}
	// After the run the page shows the final state, and the events one
	// done event at once.
	again, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Body.Close()
	ev, err := readEvent(t, bufio.NewReader(again.Body))
	if err != nil || ev.name != "done" || ev.counter("done") != "3" {
		t.Errorf("events after the run: %q done %q (%v), want done with 3", ev.name, ev.counter("done"), err)
	}
}

func TestLiveClientLeaves(t *testing.T) {
	t.Parallel()
	_, _, srv, _ := liveRun(t)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readEvent(t, bufio.NewReader(resp.Body)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	// srv.Close in the cleanup waits for the handler: it must have
	// returned on the client's leaving, while the run goes on.
}

func TestLiveRoutes(t *testing.T) {
	t.Parallel()
	_, _, srv, _ := liveRun(t)
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodHead, "/", http.StatusOK},
		{http.MethodGet, "/nope", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
		}
	}
}

func TestLiveStreamsEndOnServerShutdown(t *testing.T) {
	t.Parallel()
	e := new(fakeEngine)
	s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	base, cancelBase := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(report.NewLive(s))
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := readEvent(t, r); err != nil {
		t.Fatal(err)
	}
	cancelBase() // what the CLI does before shutting its server down
	for {
		if _, err := readEvent(t, r); err != nil {
			break // the stream ended while the run goes on
		}
	}
	select {
	case <-s.Done():
		t.Error("the run ended first")
	default:
	}
}

func TestLiveServesLatestResults(t *testing.T) {
	t.Parallel()
	e := new(fakeEngine)
	s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats, Info: report.Info{Job: "live", Price: &llm.Price{Input: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	l := report.NewLive(s)
	l.Result(&batchagent.Result{Index: 4, Input: job.Input{"q": "<b>"}, Output: []byte(`{"a":1}`), Turns: 2,
		Usage: llm.Usage{PromptTokens: 1_000_000}})
	l.Result(&batchagent.Result{Index: 7, Input: job.Input{"q": "x"}, Err: &job.AgentError{Agent: 7, Op: "tool", Kind: job.KindTool, Err: errors.New("boom")}})
	srv := httptest.NewServer(l)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/results", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got report.Results
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("GET /results: %v", err)
	}
	if resp.StatusCode != http.StatusOK || got.Total != 2 || got.Failed != 1 || len(got.Rows) != 2 {
		t.Fatalf("GET /results = %d %+v, want 200, 2 results, 1 failed", resp.StatusCode, got)
	}
	if r := got.Rows[0]; r.Index != 7 || r.Status != "failed" || r.Kind != "tool" || r.Error != "tool: boom" {
		t.Errorf("first row %+v, want agent 7's tool failure", r)
	}
	if r := got.Rows[1]; r.Index != 4 || r.Input != `{"q":"\u003cb\u003e"}` && r.Input != `{"q":"<b>"}` || r.Output != `{"a":1}` || r.Cost != 1 || r.Turns != 2 {
		t.Errorf("second row %+v, want agent 4's output, cost 1", r)
	}
	// The page embeds the same rows for its table.
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/", nil)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	page, _ := io.ReadAll(resp2.Body)
	if !strings.Contains(string(page), `id="results-data"`) || !strings.Contains(string(page), "boom") {
		t.Errorf("the live page has no results table holding the failure")
	}
}
