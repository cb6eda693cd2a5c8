package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/server"
)

// wantStatus fails t unless err is the official client's error with
// status and OpenAI error code code (when not empty).
func wantStatus(t *testing.T, what string, err error, status int, code string) *openai.Error {
	t.Helper()
	ae, ok := errors.AsType[*openai.Error](err)
	if !ok {
		t.Fatalf("%s: error %v, want an *openai.Error of status %d", what, err, status)
	}
	if ae.StatusCode != status || code != "" && ae.Code != code || ae.Message == "" {
		t.Errorf("%s: status %d code %q message %q, want %d %q and a message", what, ae.StatusCode, ae.Code, ae.Message, status, code)
	}
	return ae
}

// retryAfter returns the Retry-After of the error's response in seconds,
// or -1.
func retryAfter(ae *openai.Error) int {
	n, err := strconv.Atoi(ae.Response.Header.Get("Retry-After"))
	if err != nil {
		return -1
	}
	return n
}

func TestErrorStatuses(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 1, ToolTurns: -1})
	g := newGateway(t, server.Config{
		Backends:     map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}},
		Keys:         []server.Key{{Name: "test", SHA256: server.HashKey(testKey)}, {Name: "slow", SHA256: server.HashKey("rpm-key"), RPM: 1}},
		MaxBodyBytes: 4096,
	})
	c := g.client(testKey)
	ctx := t.Context()

	_, err := g.client("wrong-key").Chat.Completions.New(ctx, userParams("sim", "hi"))
	wantStatus(t, "wrong key", err, http.StatusUnauthorized, "invalid_api_key")
	_, err = g.client("wrong-key").Models.List(ctx)
	wantStatus(t, "models with a wrong key", err, http.StatusUnauthorized, "invalid_api_key")

	_, err = c.Chat.Completions.New(ctx, userParams("no-such-model", "hi"))
	wantStatus(t, "unknown model", err, http.StatusNotFound, "model_not_found")
	_, err = c.Chat.Completions.New(ctx, userParams("agent:nobody", "hi"))
	wantStatus(t, "unknown agent", err, http.StatusNotFound, "model_not_found")

	p := userParams("sim", "hi")
	p.N = openai.Int(129) // 1 to 128 (n > 1 is fanned out: TestNFanOut)
	ae := wantStatus(t, "n=129", err2(c.Chat.Completions.New(ctx, p)), http.StatusBadRequest, "invalid_value")
	if ae.Param != "n" {
		t.Errorf("n=129: param %q, want n", ae.Param)
	}

	_, err = c.Chat.Completions.New(ctx, userParams("sim", strings.Repeat("long ", 2000)))
	wantStatus(t, "huge body", err, http.StatusRequestEntityTooLarge, "request_too_large")

	// The per-key RPM: one request a minute.
	rc := g.client("rpm-key")
	if _, err := rc.Chat.Completions.New(ctx, userParams("sim", "hi")); err != nil {
		t.Fatalf("first request of the RPM key: %v", err)
	}
	ae = wantStatus(t, "second request of the RPM key", err2(rc.Chat.Completions.New(ctx, userParams("sim", "hi"))), http.StatusTooManyRequests, "rate_limit_exceeded")
	if s := retryAfter(ae); s < 50 || s > 60 {
		t.Errorf("RPM key: Retry-After %d, want about 60", s)
	}

	// Raw bodies the official client would not send.
	for _, tt := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"bad JSON", `{"model":"sim","messages":[`, 400, "invalid_json"},
		{"messages of the wrong type", `{"model":"sim","messages":"hi"}`, 400, "invalid_json"},
		{"data after the JSON value", `{"model":"sim","messages":[{"role":"user","content":"hi"}]} {}`, 400, "invalid_json"},
		{"no messages", `{"model":"sim","messages":[]}`, 400, "invalid_value"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_value"},
		{"unknown role", `{"model":"sim","messages":[{"role":"wizard","content":"hi"}]}`, 400, "invalid_value"},
		{"image URL that is not https", `{"model":"sim","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "invalid_value"},
		{"bad response format", `{"model":"sim","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"yaml"}}`, 400, "invalid_value"},
		{"unknown message fields are ignored", `{"model":"sim","messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"x":1}]}`, 200, ""},
		// The simulator cannot send an extra field on: refused, never dropped.
		{"unknown field refused by the simulator", `{"model":"sim","messages":[{"role":"user","content":"hi"}],"frobnicate":true}`, 400, "unsupported_parameter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("body: %v", err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d (%+v), want %d", resp.StatusCode, body.Error, tt.status)
			}
			if tt.status != 200 && (body.Error == nil || body.Error.Code == nil || *body.Error.Code != tt.code || body.Error.Type != "invalid_request_error") {
				t.Errorf("error %+v, want an invalid_request_error of code %q", body.Error, tt.code)
			}
		})
	}
}

func err2[T any](_ T, err error) error { return err }

// TestKeyConcurrency: a key limited to one request in progress gets 429
// for a second one while the first runs.
func TestKeyConcurrency(t *testing.T) {
	up, url := simHTTP(t, simhttp.Config{Model: sim.Config{Seed: 1, ToolTurns: -1}, DecodeStep: 20 * time.Millisecond})
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: openaiBackend(t, url, ""), Name: "sim"}},
		Keys:     []server.Key{{SHA256: server.HashKey(testKey), MaxConcurrent: 1}},
	})
	var wg sync.WaitGroup
	var first error
	wg.Go(func() { _, first = g.client(testKey).Chat.Completions.New(t.Context(), userParams("sim", "hi")) })
	deadline := time.Now().Add(5 * time.Second)
	for up.Stats().Running == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling until the first call runs upstream
	}
	_, err := g.client(testKey).Chat.Completions.New(t.Context(), userParams("sim", "hi"))
	ae := wantStatus(t, "second concurrent request", err, http.StatusTooManyRequests, "rate_limit_exceeded")
	if s := retryAfter(ae); s != 1 {
		t.Errorf("Retry-After %d, want 1", s)
	}
	wg.Wait()
	if first != nil {
		t.Errorf("first request: %v", first)
	}
}

// TestUpstreamErrors maps the backend's failures, and its absence.
func TestUpstreamErrors(t *testing.T) {
	for _, tt := range []struct {
		fault  simhttp.Fault
		status int
		code   string
		retry  int
	}{
		{simhttp.FaultRateLimited, http.StatusTooManyRequests, "rate_limit_exceeded", 1},
		{simhttp.FaultOverloaded, http.StatusServiceUnavailable, "overloaded", -1},
		{simhttp.FaultServerError, http.StatusInternalServerError, "internal_error", -1},
		{simhttp.FaultBadRequest, http.StatusBadRequest, "invalid_value", -1},
	} {
		t.Run(string(tt.fault), func(t *testing.T) {
			_, url := simHTTP(t, simhttp.Config{Fault: tt.fault})
			g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: openaiBackend(t, url, ""), Name: "sim"}}})
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					s := g.client("").Chat.Completions.NewStreaming(t.Context(), userParams("sim", "hi"))
					for s.Next() {
					}
					err = s.Err()
				} else {
					_, err = g.client("").Chat.Completions.New(t.Context(), userParams("sim", "hi"))
				}
				ae := wantStatus(t, string(tt.fault), err, tt.status, tt.code)
				if got := retryAfter(ae); got != tt.retry {
					t.Errorf("%s (stream %v): Retry-After %d, want %d", tt.fault, stream, got, tt.retry)
				}
			}
		})
	}
	t.Run("backend down", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: openaiBackend(t, down.URL, ""), Name: "sim"}}})
		_, err := g.client("").Chat.Completions.New(t.Context(), userParams("sim", "hi"))
		wantStatus(t, "backend down", err, http.StatusBadGateway, "backend_unreachable")
	})
	t.Run("timeout", func(t *testing.T) {
		m := newSim(t, sim.Config{Latency: 2 * time.Second})
		g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: m}}, RequestTimeout: 50 * time.Millisecond})
		_, err := g.client("").Chat.Completions.New(t.Context(), userParams("sim", "hi"))
		wantStatus(t, "timeout", err, http.StatusGatewayTimeout, "timeout")
	})
}
