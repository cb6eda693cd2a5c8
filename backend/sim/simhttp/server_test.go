package simhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// HTTP tests of the server: real sockets, real time, fast timing. The
// timing model itself is tested in fake time by sched_test.go.

// fast is a server config whose requests take milliseconds.
var fast = simhttp.Config{PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: time.Microsecond}

type testServer struct {
	*simhttp.Server
	url    string
	client *http.Client
}

// startServer serves cfg on an httptest server, with Run running until
// the test ends.
func startServer(t *testing.T, cfg simhttp.Config) *testServer {
	t.Helper()
	s, err := simhttp.New(cfg)
	if err != nil {
		t.Fatalf("NewServer(%+v) = %v", cfg, err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // Run's result
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
	return &testServer{Server: s, url: hs.URL, client: hs.Client()}
}

// post sends a chat-completion request.
func (ts *testServer) post(t *testing.T, ctx context.Context, body any, header ...string) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/chat/completions: %v", err)
	}
	return resp
}

func (ts *testServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := ts.client.Get(ts.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// body is a chat request in OpenAI's format.
type body map[string]any

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

// request returns a request with a system prompt and a task.
func request(system, task string) body {
	return body{"model": "test-model", "messages": []any{msg("system", system), msg("user", task)}}
}

func (b body) with(kv ...any) body {
	out := body{}
	for k, v := range b {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

var wireTools = []any{
	map[string]any{"type": "function", "function": map[string]any{"name": "read_file", "description": "Read a file.",
		"parameters": json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}},
	map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": "Look up an id.",
		"parameters": json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)}},
}

// The non-streamed answer, every field of OpenAI's format; decoding
// rejects unknown fields.
type wireCompletion struct {
	ID      *string `json:"id"`
	Object  string  `json:"object"`
	Created *int64  `json:"created"`
	Model   string  `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
}

type wireToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *wireUsage) llm(t *testing.T) llm.Usage {
	t.Helper()
	if u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens == nil {
		t.Fatal("usage without prompt_tokens_details.cached_tokens")
	}
	if u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage total_tokens = %d, want %d + %d", u.TotalTokens, u.PromptTokens, u.CompletionTokens)
	}
	return llm.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: *u.PromptTokensDetails.CachedTokens}
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"delta"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
}

func decodeStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// complete sends a non-streamed request and returns its answer as an
// llm.Response, checking the wire format.
func complete(t *testing.T, ts *testServer, b body) *llm.Response {
	t.Helper()
	resp := ts.post(t, t.Context(), b)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST = %d %s, want 200", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var c wireCompletion
	if err := decodeStrict(data, &c); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	if c.ID == nil || !strings.HasPrefix(*c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Created == nil || c.Model != "test-model" {
		t.Errorf("answer header = %s, want id chatcmpl-*, object chat.completion, created, model test-model", data)
	}
	if len(c.Choices) != 1 || c.Choices[0].Index != 0 || c.Choices[0].FinishReason == nil || c.Usage == nil {
		t.Fatalf("answer %s: want one choice with a finish_reason, and usage", data)
	}
	m := c.Choices[0].Message
	if m.Role != "assistant" {
		t.Errorf("message role = %q, want assistant", m.Role)
	}
	r := &llm.Response{Message: llm.Message{Role: llm.RoleAssistant}, FinishReason: llm.FinishReason(*c.Choices[0].FinishReason), Usage: c.Usage.llm(t)}
	if m.Content != nil {
		r.Message.Content = *m.Content
	} else if len(m.ToolCalls) == 0 {
		t.Errorf("answer %s: content null without tool calls", data)
	}
	for _, tc := range m.ToolCalls {
		if tc.Type != "function" || tc.ID == "" {
			t.Errorf("tool call %+v: want type function and an id", tc)
		}
		r.Message.ToolCalls = append(r.Message.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
	}
	return r
}

// streamed is a parsed stream.
type streamed struct {
	resp   *llm.Response
	chunks []wireChunk
	// argChunks counts the chunks carrying arguments, by tool call.
	argChunks map[int]int
}

// stream sends a streamed request with include_usage and reassembles its
// answer with llm.Accumulator, checking the wire format.
func stream(t *testing.T, ts *testServer, b body) streamed {
	t.Helper()
	resp := ts.post(t, t.Context(), b.with("stream", true, "stream_options", map[string]any{"include_usage": true}))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST stream = %d %s, want 200", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	events := strings.Split(string(data), "\n\n")
	if len(events) < 2 || events[len(events)-2] != "data: [DONE]" || events[len(events)-1] != "" {
		t.Fatalf("stream does not end with data: [DONE]: %q", data)
	}
	out := streamed{argChunks: map[int]int{}}
	var acc llm.Accumulator
	for i, ev := range events[:len(events)-2] {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %d = %q, want a data line", i, ev)
		}
		var c wireChunk
		if err := decodeStrict([]byte(payload), &c); err != nil {
			t.Fatalf("event %d %s: %v", i, payload, err)
		}
		out.chunks = append(out.chunks, c)
		if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != "test-model" {
			t.Errorf("chunk %d = %s, want object chat.completion.chunk, id chatcmpl-*, model test-model", i, payload)
		}
		last := i == len(events)-3
		if last != (c.Usage != nil) || last != (len(c.Choices) == 0) {
			t.Errorf("chunk %d = %s: want usage and no choices in the last chunk only", i, payload)
		}
		if c.Usage != nil {
			acc.Add(llm.Event{Type: llm.EventUsage, Usage: c.Usage.llm(t)})
		}
		for _, ch := range c.Choices {
			if (ch.Delta.Role == "assistant") != (i == 0) {
				t.Errorf("chunk %d = %s: want the role in the first chunk only", i, payload)
			}
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				acc.Add(llm.Event{Type: llm.EventText, Text: *ch.Delta.Content})
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("chunk %d = %s: tool call delta without index", i, payload)
				}
				if tc.Function.Arguments != "" {
					out.argChunks[*tc.Index]++
				}
				acc.Add(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: *tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
			}
			if ch.FinishReason != nil {
				if i != len(events)-4 {
					t.Errorf("chunk %d = %s: finish_reason before the last choice chunk", i, payload)
				}
				acc.Add(llm.Event{Type: llm.EventDone, FinishReason: llm.FinishReason(*ch.FinishReason)})
			}
		}
	}
	out.resp = acc.Response()
	return out
}

// compareResponses compares responses, with arguments compared as JSON.
func compareResponses(t *testing.T, what string, got, want *llm.Response) {
	t.Helper()
	opt := cmp.Transformer("json", func(r json.RawMessage) any {
		var v any
		if json.Unmarshal(r, &v) != nil {
			return string(r)
		}
		return v
	})
	if diff := cmp.Diff(want, got, opt); diff != "" {
		t.Errorf("%s: response mismatch (-want +got):\n%s", what, diff)
	}
}

func TestServerAnswers(t *testing.T) {
	t.Parallel()
	ts := startServer(t, fast)
	system := strings.Repeat("You are a careful reviewer. ", 20)
	tests := []struct {
		name   string
		req    body
		finish llm.FinishReason
		check  func(t *testing.T, r *llm.Response)
	}{
		{"text", request(system, "Say hello."), llm.FinishStop, func(t *testing.T, r *llm.Response) {
			if !strings.HasPrefix(r.Message.Content, "Done. ") {
				t.Errorf("content = %q, want the sim's answer", r.Message.Content)
			}
		}},
		{"tool calls", request(system, "Review path: a.go now.").with("tools", wireTools), llm.FinishToolCalls, func(t *testing.T, r *llm.Response) {
			if len(r.Message.ToolCalls) != 2 || r.Message.ToolCalls[0].Name != "read_file" || r.Message.ToolCalls[1].Name != "lookup" {
				t.Fatalf("tool calls = %+v, want read_file and lookup", r.Message.ToolCalls)
			}
			var args struct{ Path string }
			if err := json.Unmarshal(r.Message.ToolCalls[0].Arguments, &args); err != nil || args.Path != "a.go" {
				t.Errorf("read_file arguments = %s, want path a.go", r.Message.ToolCalls[0].Arguments)
			}
		}},
		{"tool result", body{"model": "test-model", "tools": wireTools, "messages": []any{
			msg("system", system), msg("user", "Read a.go."),
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "read_file", "arguments": `{"path":"a.go"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "package a"},
		}}, llm.FinishStop, func(t *testing.T, r *llm.Response) {
			if r.Message.Content == "" || len(r.Message.ToolCalls) != 0 {
				t.Errorf("answer = %+v, want text after the tool turn", r.Message)
			}
		}},
		{"structured", request(system, "Count.").with("response_format", map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "answer", "schema": json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}}),
			llm.FinishStop, func(t *testing.T, r *llm.Response) {
				var v struct{ N *int }
				if err := json.Unmarshal([]byte(r.Message.Content), &v); err != nil || v.N == nil {
					t.Errorf("content = %q, want a JSON object with an integer n", r.Message.Content)
				}
			}},
		{"content parts, max_tokens", request(system, "").with("messages", []any{msg("system", system),
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Say hello."}}}}, "max_tokens", 2),
			llm.FinishLength, func(t *testing.T, r *llm.Response) {
				if r.Usage.CompletionTokens != 2 || len(r.Message.Content) > 8 {
					t.Errorf("answer = %q, %d tokens; want 2 tokens, at most 8 bytes", r.Message.Content, r.Usage.CompletionTokens)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := complete(t, ts, tt.req)
			if r.FinishReason != tt.finish {
				t.Errorf("finish_reason = %q, want %q", r.FinishReason, tt.finish)
			}
			if r.Usage.PromptTokens < 140 || r.Usage.CompletionTokens < 1 {
				t.Errorf("usage = %+v, want the prompt's tokens (>= 140) and >= 1 completion token", r.Usage)
			}
			tt.check(t, r)
			// The same request streamed reassembles to the same answer,
			// usage included (the prefix is cached by then).
			s := stream(t, ts, tt.req)
			r2 := complete(t, ts, tt.req)
			s.resp.Usage.CachedTokens = r2.Usage.CachedTokens
			compareResponses(t, "stream against non-stream", s.resp, r2)
			for i := range r.Message.ToolCalls {
				if s.argChunks[i] < 2 {
					t.Errorf("tool call %d: arguments in %d chunks, want >= 2", i, s.argChunks[i])
				}
			}
		})
	}
}

func TestServerCachedTokens(t *testing.T) {
	t.Parallel()
	ts := startServer(t, fast)
	system := strings.Repeat("Shared system prompt of the job. ", 40) // ≈ 330 tokens
	first := complete(t, ts, request(system, "Task one."))
	if first.Usage.CachedTokens != 0 {
		t.Errorf("first request: cached_tokens = %d, want 0", first.Usage.CachedTokens)
	}
	second := stream(t, ts, request(system, "Task two."))
	if c, p := second.resp.Usage.CachedTokens, second.resp.Usage.PromptTokens; c < 320 || c >= p || c%16 != 0 {
		t.Errorf("second request: cached_tokens = %d of %d, want the shared prefix's full blocks (>= 320, multiple of 16)", c, p)
	}
	other := complete(t, ts, request("A different prompt. "+system, "Task one."))
	if other.Usage.CachedTokens != 0 {
		t.Errorf("unrelated prompt: cached_tokens = %d, want 0", other.Usage.CachedTokens)
	}
	st := ts.Stats()
	if st.Requests != 3 || st.CachedTokens != second.resp.Usage.CachedTokens || st.PromptTokens != first.Usage.PromptTokens+second.resp.Usage.PromptTokens+other.Usage.PromptTokens {
		t.Errorf("Stats() = %+v, want 3 requests and the usages' sums", st)
	}
}

// readUntilContent reads a stream until its first content delta.
func readUntilContent(t *testing.T, r *bufio.Reader) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before any content: %v", err)
		}
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			return
		}
	}
}

// TestServerBackpressure fills the one slot and the one queue place, and
// checks the 429, the metrics under load and that a client going away
// frees its slot.
func TestServerBackpressure(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.MaxSeqs, cfg.MaxQueue = 1, 1
	cfg.DecodeStep = 5 * time.Millisecond
	ts := startServer(t, cfg)
	long := request("Write at length.", "Go.").with("stream", true, "response_format", map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "essay", "schema": json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","minLength":40000}},"required":["text"]}`)}})

	// A runs (10,000 tokens: about a minute), B waits.
	ctxA, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	a := ts.post(t, ctxA, long)
	defer a.Body.Close()
	readUntilContent(t, bufio.NewReader(a.Body))
	b := ts.post(t, t.Context(), request("Second.", "Go.").with("stream", true))
	defer b.Body.Close()
	if b.StatusCode != http.StatusOK { // the stream's headers: B is queued
		t.Fatalf("B: status %d, want 200", b.StatusCode)
	}

	c := ts.post(t, t.Context(), request("Third.", "Go."))
	data, _ := io.ReadAll(c.Body)
	c.Body.Close()
	if c.StatusCode != http.StatusTooManyRequests || c.Header.Get("Retry-After") != "1" {
		t.Errorf("C: status %d, Retry-After %q; want 429, 1", c.StatusCode, c.Header.Get("Retry-After"))
	}
	checkError(t, data, "rate_limit_error", "rate_limit_exceeded")

	code, text := ts.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	m := parseMetrics(t, text)
	want := map[string]float64{
		"vllm:num_requests_running": 1, "vllm:num_requests_waiting": 1, "batchagent_sim_rejected_total": 1,
	}
	for name, v := range want {
		if m[name] != v {
			t.Errorf("metric %s = %v, want %v", name, m[name], v)
		}
	}
	for _, name := range []string{"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total"} {
		if m[name] <= 0 {
			t.Errorf("metric %s = %v, want > 0", name, m[name])
		}
	}
	if _, ok := m["vllm:prefix_cache_hits_total"]; !ok {
		t.Error("metric vllm:prefix_cache_hits_total missing")
	}

	// A's client goes away: B gets the slot and finishes.
	cancelA()
	rb := bufio.NewReader(b.Body)
	readUntilContent(t, rb)
	rest, err := io.ReadAll(rb)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("B's stream after A left: %q, %v; want it to end with [DONE]", rest, err)
	}
	if st := ts.Stats(); st.Waiting != 0 || st.Rejected != 1 {
		t.Errorf("Stats() = %+v, want 0 waiting, 1 rejected", st)
	}
}

func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, text)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// checkError checks an OpenAI error body.
func checkError(t *testing.T, data []byte, typ, code string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   any     `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := decodeStrict(data, &e); err != nil || e.Error == nil {
		t.Fatalf("error body %s: %v", data, err)
	}
	if e.Error.Message == "" || e.Error.Type != typ || e.Error.Code == nil || *e.Error.Code != code {
		t.Errorf("error = %s, want a message, type %q, code %q", data, typ, code)
	}
}

func TestServerErrors(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.APIKey = "sk-sim-secret"
	cfg.ContextWindow = 100
	ts := startServer(t, cfg)
	auth := []string{"Authorization", "Bearer sk-sim-secret"}
	tests := []struct {
		name   string
		req    any
		header []string
		status int
		typ    string
		code   string
	}{
		{"no key", request("S", "Go."), nil, 401, "invalid_request_error", "invalid_api_key"},
		{"wrong key", request("S", "Go."), []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_request_error", "invalid_api_key"},
		{"context window", request(strings.Repeat("long ", 100), "Go."), auth, 400, "invalid_request_error", "context_length_exceeded"},
		{"context window with max_tokens", request("S", "Go.").with("max_tokens", 90), auth, 400, "invalid_request_error", "context_length_exceeded"},
		{"not JSON", "{", auth, 400, "invalid_request_error", "invalid_value"},
		{"no messages", body{"model": "m", "messages": []any{}}, auth, 400, "invalid_request_error", "invalid_value"},
		{"unknown role", body{"messages": []any{msg("wizard", "hi")}}, auth, 400, "invalid_request_error", "invalid_value"},
		{"max_tokens 0", request("S", "Go.").with("max_tokens", 0), auth, 400, "invalid_request_error", "invalid_value"},
		{"bad schema", request("S", "Go.").with("response_format", map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "x", "schema": json.RawMessage(`{"$ref":"#/nowhere"}`)}}), auth, 400, "invalid_request_error", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var resp *http.Response
			if s, ok := tt.req.(string); ok {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.url+"/v1/chat/completions", strings.NewReader(s))
				req.Header.Set(tt.header[0], tt.header[1])
				var err error
				if resp, err = ts.client.Do(req); err != nil {
					t.Fatal(err)
				}
			} else {
				resp = ts.post(t, t.Context(), tt.req, tt.header...)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d (%s)", resp.StatusCode, tt.status, data)
			}
			checkError(t, data, tt.typ, tt.code)
			if bytes.Contains(data, []byte("sk-sim-secret")) {
				t.Errorf("error body %s contains the API key", data)
			}
		})
	}
	t.Run("right key", func(t *testing.T) {
		t.Parallel()
		resp := ts.post(t, t.Context(), request("S", "Go."), auth...)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status = %d, want 200", resp.StatusCode)
		}
	})
	t.Run("open endpoints", func(t *testing.T) {
		t.Parallel()
		for path, want := range map[string]int{"/metrics": 200, "/health": 200, "/v1/models": 401, "/nowhere": 404} {
			if code, text := ts.get(t, path); code != want {
				t.Errorf("GET %s = %d %s, want %d", path, code, text, want)
			}
		}
	})
}

// TestServerLifecycle checks the endpoints before, during and after Run:
// a request that arrives before Run waits for it, one after gets 503.
func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.ModelName = "qwen-sim"
	s, err := simhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := hs.Client().Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func() (int, string) {
		resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/health"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /health before Run = %d, want 503", code)
	}
	type result struct {
		code int
		body string
	}
	early := make(chan result, 1) // the answer to a request sent before Run
	go func() {
		code, body := post()
		early <- result{code, body}
	}()
	for s.Stats().Waiting == 0 { // until the request is queued
		select {
		case r := <-early:
			t.Fatalf("POST sent before Run = %d %s before it was queued, want it to wait for Run", r.code, r.body)
		default:
		}
		runtime.Gosched()
	}

	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1) // Run's result
	go func() { ran <- s.Run(ctx) }()
	if r := <-early; r.code != http.StatusOK {
		t.Errorf("POST sent before Run = %d %s, want 200 once Run starts", r.code, r.body)
	}
	if code, _ := get("/health"); code != http.StatusOK {
		t.Errorf("GET /health while running = %d, want 200", code)
	}
	code, text := get("/v1/models")
	var models struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	if err := json.Unmarshal([]byte(text), &models); err != nil || code != 200 || models.Object != "list" ||
		len(models.Data) != 1 || models.Data[0].ID != "qwen-sim" || models.Data[0].Object != "model" {
		t.Errorf("GET /v1/models = %d %s, want a list with model qwen-sim", code, text)
	}
	if code, _ := get("/v1/chat/completions"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/chat/completions = %d, want 405", code)
	}

	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if code, body := post(); code != http.StatusServiceUnavailable {
		t.Errorf("POST after Run = %d %s, want 503", code, body)
	}
	if code, _ := get("/health"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /health after Run = %d, want 503", code)
	}
	if err := s.Run(t.Context()); !errors.Is(err, simhttp.ErrServerStarted) {
		t.Errorf("Run() again = %v, want ErrServerStarted", err)
	}
}

func TestServerFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault  simhttp.Fault
		status int // 0: 200 with a broken body
		typ    string
		code   string
	}{
		{simhttp.FaultRateLimited, 429, "rate_limit_error", "rate_limit_exceeded"},
		{simhttp.FaultOverloaded, 503, "server_error", "overloaded"},
		{simhttp.FaultServerError, 500, "server_error", "internal_error"},
		{simhttp.FaultBadRequest, 400, "invalid_request_error", "invalid_value"},
		{simhttp.FaultStreamCut, 0, "", ""},
		{simhttp.FaultMalformed, 0, "", ""},
	}
	if len(tests) != len(simhttp.Faults) {
		t.Fatalf("%d faults tested, want all %d", len(tests), len(simhttp.Faults))
	}
	for _, tt := range tests {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tt.fault, streaming), func(t *testing.T) {
				t.Parallel()
				cfg := fast
				cfg.Fault = tt.fault
				ts := startServer(t, cfg)
				resp := ts.post(t, t.Context(), request("S", "Say hello.").with("stream", streaming))
				data, readErr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if tt.status != 0 {
					if resp.StatusCode != tt.status {
						t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
					}
					if got := resp.Header.Get("Retry-After"); (tt.status == 429) != (got == "1") {
						t.Errorf("Retry-After = %q", got)
					}
					checkError(t, data, tt.typ, tt.code)
					return
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status = %d, want 200", resp.StatusCode)
				}
				switch {
				case tt.fault == simhttp.FaultStreamCut:
					if !errors.Is(readErr, io.ErrUnexpectedEOF) {
						t.Errorf("reading the body = %v, want io.ErrUnexpectedEOF", readErr)
					}
					if streaming && (!strings.Contains(string(data), `"content":"`) || strings.Contains(string(data), "[DONE]")) {
						t.Errorf("cut stream = %q, want a content chunk and no [DONE]", data)
					}
				case streaming: // malformed
					bad := 0
					for ev := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n\n") {
						p := strings.TrimPrefix(ev, "data: ")
						if p != "[DONE]" && !json.Valid([]byte(p)) {
							bad++
						}
					}
					if readErr != nil || bad != 1 {
						t.Errorf("malformed stream %q (%v): %d invalid data lines, want 1", data, readErr, bad)
					}
				default: // malformed
					if readErr != nil || json.Valid(data) || len(data) == 0 {
						t.Errorf("malformed body %q (%v): want truncated JSON", data, readErr)
					}
				}
			})
		}
	}
}

func TestNewServerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  simhttp.Config
	}{
		{"negative max seqs", simhttp.Config{MaxSeqs: -1}},
		{"negative prefill", simhttp.Config{PrefillPerToken: -time.Millisecond}},
		{"negative decode step", simhttp.Config{DecodeStep: -time.Millisecond}},
		{"negative context", simhttp.Config{ContextWindow: -1}},
		{"unknown fault", simhttp.Config{Fault: "meteor"}},
		{"bad model config", simhttp.Config{Model: sim.Config{InvalidRate: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := simhttp.New(tt.cfg); err == nil {
				t.Errorf("NewServer(%+v) = nil error, want one", tt.cfg)
			}
		})
	}
}
