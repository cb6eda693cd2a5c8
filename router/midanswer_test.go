package router_test

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/router"
)

// dyingUpstream is an OpenAI-compatible server that reads each request
// whole and then fails the way a deployment going down does.
func dyingUpstream(t *testing.T, die func(buf *bufio.ReadWriter)) *openai.Model {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request was sent, whole
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		die(buf)
	}))
	t.Cleanup(srv.Close)
	return openAIModel(t, srv.URL)
}

// statusUpstream answers every request with status.
func statusUpstream(t *testing.T, status int) *openai.Model {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":{"message":"upstream going down"}}`, status)
	}))
	t.Cleanup(srv.Close)
	return openAIModel(t, srv.URL)
}

func openAIModel(t *testing.T, base string) *openai.Model {
	t.Helper()
	cfg, err := openai.ParseURL("openai+" + base + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = "m"
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeRaw writes s on the hijacked connection, then the handler closes it.
func writeRaw(s string) func(*bufio.ReadWriter) {
	return func(buf *bufio.ReadWriter) {
		_, _ = buf.WriteString(s)
		_ = buf.Flush()
	}
}

// TestGenerateRerunsMidAnswer: a non-streamed call whose deployment dies
// after the request was sent (the connection closed before an answer, an
// answer cut before its length, an answer cut with no length, a 502 or a
// 503) is answered by the other deployment; the dying one's failures
// count against it (the 503 aside: overloaded is no ill health).
func TestGenerateRerunsMidAnswer(t *testing.T) {
	const head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	tests := []struct {
		name       string
		model      func(t *testing.T) *openai.Model
		wantClass  error
		wantFailed int64
	}{
		{"connection closed after the request", func(t *testing.T) *openai.Model {
			return dyingUpstream(t, writeRaw(""))
		}, llm.ErrConnection, 1},
		{"body cut before its length", func(t *testing.T) *openai.Model {
			return dyingUpstream(t, writeRaw(head+"Content-Length: 400\r\n\r\n{\"id\":\"x\",\"choices\":[{\"mess"))
		}, llm.ErrConnection, 1},
		{"chunked body cut", func(t *testing.T) *openai.Model {
			return dyingUpstream(t, writeRaw(head+"Transfer-Encoding: chunked\r\n\r\n10\r\n{\"id\":\"x\",\"choic\r\n"))
		}, llm.ErrConnection, 1},
		{"body without a length cut", func(t *testing.T) *openai.Model {
			return dyingUpstream(t, writeRaw(head+"Connection: close\r\n\r\n{\"id\":\"x\",\"choices\":[{\"mess"))
		}, llm.ErrServer, 1},
		{"502", func(t *testing.T) *openai.Model { return statusUpstream(t, http.StatusBadGateway) }, llm.ErrConnection, 1},
		{"503", func(t *testing.T) *openai.Model { return statusUpstream(t, http.StatusServiceUnavailable) }, llm.ErrOverloaded, 0},
		{"500", func(t *testing.T) *openai.Model { return statusUpstream(t, http.StatusInternalServerError) }, llm.ErrServer, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dying := tt.model(t)
			// The class the backend gives this death, which the router
			// must take as one to run again.
			if _, err := dying.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); !errors.Is(err, tt.wantClass) {
				t.Fatalf("the dying deployment alone: %v, want class %v", err, tt.wantClass)
			}
			live, err := sim.New(sim.Config{Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			r := newRouter(t, router.Config{Deployments: []router.Deployment{
				{Name: "dying", Model: dying, Weight: 100}, {Name: "live", Model: live}}})
			resp, err := r.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			if err != nil || resp.Message.Content == "" {
				t.Fatalf("Generate = %v, %v; want the live deployment's answer", resp, err)
			}
			d, l := statsOf(r, "dying"), statsOf(r, "live")
			if d.Requests != 1 || d.Failures != tt.wantFailed || l.Requests != 1 {
				t.Errorf("dying %+v, live %+v; want one call each, %d failure on the dying one", d, l, tt.wantFailed)
			}
		})
	}
}

// TestStreamCutNotReplayed: a stream cut by its deployment's death after
// its first content event ends with the cut's error, the part the caller
// has seen kept, and is not started again on the other deployment.
func TestStreamCutNotReplayed(t *testing.T) {
	dying := dyingUpstream(t, writeRaw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+
		chunk(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"par"}}]}`+"\n\n")))
	live, err := sim.New(sim.Config{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(t, router.Config{Deployments: []router.Deployment{
		{Name: "dying", Model: dying, Weight: 100}, {Name: "live", Model: live}}})
	var text string
	var gotErr error
	for ev, err := range r.Stream(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
		if err != nil {
			gotErr = err
			break
		}
		text += ev.Text
	}
	if text != "par" || !errors.Is(gotErr, llm.ErrConnection) {
		t.Errorf("Stream = %q, %v; want \"par\" then a connection failure", text, gotErr)
	}
	if l := statsOf(r, "live"); l.Requests != 0 {
		t.Errorf("live deployment got %d calls, want 0: a cut stream is not replayed", l.Requests)
	}
}

// chunk is s as one chunk of a chunked HTTP body.
func chunk(s string) string {
	return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n"
}

// TestStreamCutReplayedForWholeAnswer: under llm.WithWholeAnswer (the
// caller shows nothing until the end) a stream cut mid-answer is started
// again on the other deployment, and the caller gets only that answer.
func TestStreamCutReplayedForWholeAnswer(t *testing.T) {
	dying := dyingUpstream(t, writeRaw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+
		chunk(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"par"}}]}`+"\n\n")))
	live := &fakeModel{name: "live"}
	r := newRouter(t, router.Config{Deployments: []router.Deployment{
		{Name: "dying", Model: dying, Weight: 100}, {Name: "live", Model: live}}})
	var text string
	for ev, err := range r.Stream(llm.WithWholeAnswer(t.Context()), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
		if err != nil {
			t.Fatalf("Stream: %v after %q, want the live deployment's answer", err, text)
		}
		text += ev.Text
	}
	if text != "live" {
		t.Errorf("Stream = %q, want %q alone (the cut part held back)", text, "live")
	}
	if d := statsOf(r, "dying"); d.Requests != 1 || d.Failures != 1 {
		t.Errorf("dying %+v, want one call, failed", d)
	}
}
