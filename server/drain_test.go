package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/server"
)

// heldUpstream is an OpenAI-compatible server that tells arrived of each
// request and holds its answer (not a byte of it) until release closes;
// then it streams "Hello world" whole.
func heldUpstream(t *testing.T, arrived chan<- struct{}, release <-chan struct{}) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case arrived <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, c := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`,
		} {
			io.WriteString(w, "data: "+c+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestDrainAdmitted (issue 27, defect 6): on a backend of one slot, a
// chat completion admitted (holding the slot, its backend working) but
// whose first token has not come when the drain begins is in flight: it
// finishes whole within the grace. The one still waiting for admission is
// answered 503 with Retry-After and Connection: close.
func TestDrainAdmitted(t *testing.T) {
	arrived := make(chan struct{}, 2) // one per request that reaches the upstream
	release := make(chan struct{})
	up := heldUpstream(t, arrived, release)
	be := batchagent.Backend{Model: genericBackend(t, up.URL), Name: "m"}
	e, err := batchagent.New(batchagent.Config{Backends: map[batchagent.Backend]batchagent.Admission{be: {MaxInflight: 1, FixedInflight: true}}})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Engine: e, Backends: map[string]batchagent.Backend{"m": be}})

	type answer struct {
		status     int
		retryAfter string
		close      bool // the connection closes after the answer
		body       string
		err        error
	}
	post := func(body string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				ch <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			ch <- answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), close: resp.Close, body: string(b), err: err}
		}()
		return ch
	}

	// A: admitted, its upstream working, no token yet.
	a := post(`{"model":"m","stream":true,"messages":[{"role":"user","content":"A"}]}`)
	select {
	case <-arrived:
	case got := <-a:
		t.Fatalf("request A answered before reaching the upstream: %+v", got)
	}
	// B: waits for the slot A holds.
	b := post(`{"model":"m","messages":[{"role":"user","content":"B"}]}`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if s := g.engine.Stats(); s.Inflight == 1 && s.Waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("request B never waited for admission: %+v", g.engine.Stats())
		}
		time.Sleep(time.Millisecond) // polling the engine's gate
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- g.srv.Shutdown(ctx) }()

	gotB := <-b
	if gotB.err != nil || gotB.status != http.StatusServiceUnavailable || gotB.retryAfter == "" || !gotB.close {
		t.Errorf("waiting request B: status %d, Retry-After %q, closing %v (%v), want 503 with Retry-After and Connection: close",
			gotB.status, gotB.retryAfter, gotB.close, gotB.err)
	}
	close(release) // A's first token comes, after the drain began
	gotA := <-a
	if gotA.err != nil || gotA.status != http.StatusOK {
		t.Fatalf("admitted request A: status %d (%v), body %q, want 200", gotA.status, gotA.err, gotA.body)
	}
	var content strings.Builder
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(gotA.body))
	for sc.Scan() {
		l := sc.Text()
		if l == "" {
			continue
		}
		lines = append(lines, l)
		if strings.Contains(l, `"error"`) {
			t.Errorf("stream A holds an error: %s", l)
		}
		if _, c, ok := strings.Cut(l, `"content":"`); ok {
			c, _, _ = strings.Cut(c, `"`)
			content.WriteString(c)
		}
	}
	if n := len(lines); n < 3 || lines[n-1] != "data: [DONE]" || !strings.Contains(lines[n-2], `"finish_reason":"stop"`) {
		t.Errorf("stream A ended %q, want a finish chunk then [DONE]", lines[max(0, n-3):])
	}
	if content.String() != "Hello world" {
		t.Errorf("stream A content %q, want %q", content.String(), "Hello world")
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
}
