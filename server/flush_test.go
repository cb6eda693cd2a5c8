package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// flushCounter is a ResponseWriter that counts the flushes of the
// writer it wraps.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w flushCounter) Flush() {
	w.n.Add(1)
	w.ResponseWriter.(http.Flusher).Flush()
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (w flushCounter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countedGateway starts a gateway over cfg whose answers' flushes are
// counted in flushes, and stops it when the test ends.
func countedGateway(t *testing.T, cfg server.Config, flushes *atomic.Int64) string {
	t.Helper()
	e, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(flushCounter{w, flushes}, r)
	}))
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return hs.URL
}

// textChunk is an upstream's SSE chunk with content text.
func textChunk(text string) string {
	return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", text)
}

const upstreamEnd = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
	"data: [DONE]\n\n"

// TestStreamEachTokenBeforeTheNext: the gateway holds a streamed
// answer's chunks until its upstream would wait, never longer: with an
// upstream that sends token k+1 only once the client has read token k,
// every token reaches the client (else the stream stalls and the
// request's deadline fails the test).
func TestStreamEachTokenBeforeTheNext(t *testing.T) {
	const tokens = 5
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for k := range tokens {
			io.WriteString(w, textChunk(fmt.Sprintf("t%d", k)))
			w.(http.Flusher).Flush()
			select {
			case <-next: // the client has read token k
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, upstreamEnd)
	}))
	t.Cleanup(up.Close)
	var flushes atomic.Int64
	url := countedGateway(t, server.Config{Backends: map[string]batchagent.Backend{"oai": {Model: genericBackend(t, up.URL), Name: "oai"}}}, &flushes)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"oai","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	for k := range tokens {
		want := fmt.Sprintf(`"content":"t%d"`, k)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("token %d never reached the client before the upstream sent the next: %v", k, err)
			}
			if strings.Contains(line, want) {
				break
			}
		}
		next <- struct{}{}
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("reading the end: %v", err)
	}
	if !strings.Contains(string(rest), `"finish_reason":"stop"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("end of stream %q, want the finish chunk and [DONE]", rest)
	}
	if n := flushes.Load(); n < tokens {
		t.Errorf("%d flushes for %d tokens sent apart, want one a token at least", n, tokens)
	}
}

// TestStreamWholeAnswerFewFlushes: an answer that the upstream sends in
// one write reaches the client in a few flushes, not one per chunk, and
// whole.
func TestStreamWholeAnswerFewFlushes(t *testing.T) {
	const tokens = 40
	var answer strings.Builder
	var want strings.Builder
	for k := range tokens {
		answer.WriteString(textChunk(fmt.Sprintf("w%d ", k)))
		fmt.Fprintf(&want, "w%d ", k)
	}
	answer.WriteString(upstreamEnd)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, answer.String())
	}))
	t.Cleanup(up.Close)
	var flushes atomic.Int64
	url := countedGateway(t, server.Config{Backends: map[string]batchagent.Backend{"oai": {Model: genericBackend(t, up.URL), Name: "oai"}}}, &flushes)

	for _, usage := range []bool{false, true} {
		flushes.Store(0)
		body := `{"model":"oai","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if usage {
			body = `{"model":"oai","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		status, b := postChat(t, &gateway{url: url}, body)
		if status != http.StatusOK {
			t.Fatalf("usage %t: status %d: %s", usage, status, b)
		}
		a := readN(t, b, true)
		if a.choices[0] != want.String() || a.finish[0] != "stop" {
			t.Errorf("usage %t: content %q finish %q, want %q, stop", usage, a.choices[0], a.finish[0], want.String())
		}
		if !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Errorf("usage %t: stream does not end with [DONE]: %q", usage, b)
		}
		// One before the upstream's read of its end, one for the end.
		if n := flushes.Load(); n > 3 {
			t.Errorf("usage %t: %d flushes for an answer sent in one write (%d chunks), want 3 at most", usage, n, tokens+2)
		}
	}
}

// TestStreamUnhookedBackendFlushesEachChunk: a backend that never calls
// the read hook (the simulator in process) has each chunk flushed as it
// comes, as before.
func TestStreamUnhookedBackendFlushesEachChunk(t *testing.T) {
	var flushes atomic.Int64
	url := countedGateway(t, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}}}, &flushes)
	status, b := postChat(t, &gateway{url: url}, `{"model":"sim","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	events := int64(strings.Count(string(b), "data: "))
	// Every event but the last two (the finish chunk, flushed with
	// [DONE]) has a flush of its own.
	if n := flushes.Load(); n < events-1 {
		t.Errorf("%d flushes for %d events, want one an event", n, events)
	}
}
