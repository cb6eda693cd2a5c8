package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
)

// genericBackend is our openai client, of the generic flavor (no queue
// probe), pointed at url.
func genericBackend(t *testing.T, url string) *backendopenai.Model {
	t.Helper()
	m, err := backendopenai.New(backendopenai.Config{BaseURL: url + "/v1", APIKey: "sk-upstream-secret"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cutUpstream is an OpenAI-compatible server whose streams send one
// content chunk and then lose their connection, and whose non-streamed
// answers lose it before a byte.
func cutUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestStreamCutUpstream (issue 27, defect 4): an upstream that dies mid-
// answer ends the client's stream with an error event, without a finish
// chunk and without [DONE], so no client takes the cut answer for a whole
// one; the official client reports an error. Not streamed, it is a 502.
func TestStreamCutUpstream(t *testing.T) {
	up := cutUpstream(t)
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"m": {Model: genericBackend(t, up.URL), Name: "m"}}})

	stream := g.client("").Chat.Completions.NewStreaming(t.Context(), userParams("m", "hi"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if stream.Err() == nil {
		t.Fatalf("official client: stream ended without an error (content %q), want one", acc.Choices[0].Message.Content)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hel" || acc.Choices[0].FinishReason != "" {
		t.Errorf("official client: choices %+v before the error, want the content \"Hel\" and no finish reason", acc.Choices)
	}

	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	if len(lines) < 2 {
		t.Fatalf("stream lines %q, want chunks then an error event", lines)
	}
	var last struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[len(lines)-1], "data: ")), &last); err != nil || last.Error == nil ||
		last.Error.Message == "" || last.Error.Type != "server_error" || last.Error.Code == nil || *last.Error.Code != "backend_unreachable" {
		t.Errorf("last line %q, want an error event of type server_error, code backend_unreachable", lines[len(lines)-1])
	}
	for _, l := range lines {
		if l == "data: [DONE]" || strings.Contains(l, `"finish_reason":"`) || strings.Contains(l, `"usage":{`) {
			t.Errorf("line %q in a cut stream: want no [DONE], finish reason or usage", l)
		}
	}

	_, err = g.client("").Chat.Completions.New(t.Context(), userParams("m", "hi"))
	wantStatus(t, "not streamed", err, http.StatusBadGateway, "backend_unreachable")

	// Our own client in front of the gateway (gateways chained) sees the
	// text, then a transient failure: it retries as for a cut connection.
	events := 0
	for ev, err := range genericBackend(t, g.url).Stream(t.Context(), &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
		if err != nil {
			if events == 0 || !llm.IsTransient(err) {
				t.Errorf("our client: error %v after %d events, want a transient one after the text", err, events)
			}
			return
		}
		events++
		if ev.Type == llm.EventDone {
			t.Fatalf("our client: the stream ended whole")
		}
	}
	t.Errorf("our client: the stream ended without an error")
}

// TestErrorsHideInternals (issue 27, defect 11): a failed upstream call
// shows the client neither the upstream's address nor the variables the
// gateway reads, but a request id (header and message) under which the
// server's log holds the whole cause; an upstream that refuses the
// gateway's key is a 502 upstream_auth, not a 500.
func TestErrorsHideInternals(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := down.Listener.Addr().String()
	down.Close()
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	defer auth.Close()
	authAddr := auth.Listener.Addr().String()

	var logs syncBuffer
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{
			"down": {Model: genericBackend(t, down.URL), Name: "down"},
			"auth": {Model: genericBackend(t, auth.URL), Name: "auth"},
		},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	tests := []struct {
		model, addr string
		status      int
		code        string
		cause       string // in the log
	}{
		{"down", downAddr, http.StatusBadGateway, "backend_unreachable", "connection refused"},
		{"auth", authAddr, http.StatusBadGateway, "upstream_auth", "Incorrect API key provided"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			body := `{"model":"` + tt.model + `","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `,"messages":[{"role":"user","content":"hi"}]}`
			resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			id := resp.Header.Get("X-Request-Id")
			var out struct {
				Error *struct {
					Message string  `json:"message"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &out); err != nil || out.Error == nil || out.Error.Code == nil {
				t.Fatalf("%s (stream %v): body %q, want an error object", tt.model, stream, raw)
			}
			if resp.StatusCode != tt.status || *out.Error.Code != tt.code {
				t.Errorf("%s (stream %v): %d %q, want %d %q", tt.model, stream, resp.StatusCode, *out.Error.Code, tt.status, tt.code)
			}
			host, _, _ := strings.Cut(tt.addr, ":")
			for _, leak := range []string{tt.addr, host, "OPENAI_API_KEY", "API_KEY", "/v1/chat"} {
				if strings.Contains(string(raw), leak) {
					t.Errorf("%s (stream %v): the client sees %q: %s", tt.model, stream, leak, raw)
				}
			}
			if !strings.HasPrefix(id, "req_") || !strings.Contains(out.Error.Message, id) {
				t.Errorf("%s (stream %v): X-Request-Id %q, message %q: want the id in both", tt.model, stream, id, out.Error.Message)
			}
			var line string
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(l, "request_id="+id) && strings.Contains(l, "level=WARN") {
					line = l
				}
			}
			if !strings.Contains(line, tt.cause) {
				t.Errorf("%s (stream %v): log line of request %s is %q, want the cause %q\nlog:\n%s", tt.model, stream, id, line, tt.cause, logs.String())
			}
		}
	}
}

// TestBatchNotFoundMessage: the 404 of an unknown batch names a batch.
func TestBatchNotFoundMessage(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{}, sim.Config{})
	_, err := g.client("").Batches.Get(context.Background(), "batch_nope")
	ae := wantStatus(t, "unknown batch", err, http.StatusNotFound, "not_found")
	if want := `no batch with id "batch_nope"`; !strings.Contains(ae.Message, want) {
		t.Errorf("message %q, want %q", ae.Message, want)
	}
}
