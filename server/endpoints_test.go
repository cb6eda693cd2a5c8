package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
)

// notForwarder is a model that serves chat only, as Anthropic's and
// Bedrock's backends do: it hides the simulator's Forward.
type notForwarder struct{ llm.Model }

// postJSON sends body to path with testKey and returns the status and the
// decoded error object (nil on success) and the raw body.
func postJSON(t *testing.T, g *gateway, path, body string) (int, *struct{ Message, Type, Param, Code string }, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, nil, raw
	}
	var e struct {
		Error struct{ Message, Type, Param, Code string }
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("%s: %d with body %q, not an error object: %v", path, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, &e.Error, raw
}

// TestEndpointErrors: each new endpoint refuses bad input with OpenAI's
// error object naming the field (400), an unknown model with 404, and a
// backend that is not OpenAI-compatible with 400 naming the endpoint.
func TestEndpointErrors(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 1})
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}, "chatonly": {Model: notForwarder{m}, Name: "claude"}},
		Keys:     []server.Key{{Name: "k", SHA256: server.HashKey(testKey)}},
	})
	for _, tt := range []struct {
		name, path, body string
		status           int
		code, param      string
		says             string // in the message
	}{
		{"embeddings unknown model", "/v1/embeddings", `{"model":"nope","input":"x"}`, 404, "model_not_found", "model", "nope"},
		{"embeddings no model", "/v1/embeddings", `{"input":"x"}`, 400, "invalid_value", "model", "model is required"},
		{"embeddings bad JSON", "/v1/embeddings", `{"model":"sim","input":"x",}`, 400, "invalid_json", "", ""},
		{"embeddings duplicate key", "/v1/embeddings", `{"model":"sim","model":"x","input":"x"}`, 400, "invalid_json", "model", "duplicate key"},
		{"embeddings bad dimensions", "/v1/embeddings", `{"model":"sim","input":"x","dimensions":0}`, 400, "", "", "dimensions"},
		{"embeddings bad input", "/v1/embeddings", `{"model":"sim","input":{"a":1}}`, 400, "", "", "input"},
		{"embeddings not OpenAI-compatible", "/v1/embeddings", `{"model":"chatonly","input":"x"}`, 400, "unsupported_endpoint", "model", "/v1/embeddings"},
		{"completions not OpenAI-compatible", "/v1/completions", `{"model":"chatonly","prompt":"x"}`, 400, "unsupported_endpoint", "model", "/v1/completions"},
		{"completions no prompt", "/v1/completions", `{"model":"sim"}`, 400, "", "", "prompt"},
		{"completions negative max_tokens", "/v1/completions", `{"model":"sim","prompt":"x","max_tokens":-1}`, 400, "invalid_value", "max_tokens", ""},
		{"responses unknown model", "/v1/responses", `{"model":"nope","input":"x"}`, 404, "model_not_found", "model", ""},
		{"responses unmapped field", "/v1/responses", `{"model":"sim","input":"x","previous_response_id":"resp_1"}`, 400, "unsupported_parameter", "previous_response_id", "previous_response_id"},
		{"responses no input", "/v1/responses", `{"model":"sim"}`, 400, "invalid_value", "input", ""},
		{"responses item type", "/v1/responses", `{"model":"sim","input":[{"type":"reasoning","summary":[]}]}`, 400, "invalid_value", "input[0].type", "reasoning"},
		{"responses part type", "/v1/responses", `{"model":"sim","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, 400, "invalid_value", "input[0].content[0].type", "input_audio"},
		{"responses role", "/v1/responses", `{"model":"sim","input":[{"role":"robot","content":"x"}]}`, 400, "invalid_value", "input[0].role", "robot"},
		{"responses tool type", "/v1/responses", `{"model":"sim","input":"x","tools":[{"type":"web_search"}]}`, 400, "invalid_value", "tools[0].type", "web_search"},
		{"responses tool_choice", "/v1/responses", `{"model":"sim","input":"x","tool_choice":42}`, 400, "invalid_value", "tool_choice", ""},
		{"responses format", "/v1/responses", `{"model":"sim","input":"x","text":{"format":{"type":"xml"}}}`, 400, "invalid_value", "text.format.type", "xml"},
		{"responses schema", "/v1/responses", `{"model":"sim","input":"x","text":{"format":{"type":"json_schema","name":"a"}}}`, 400, "invalid_value", "text.format.schema", ""},
		{"responses max_output_tokens", "/v1/responses", `{"model":"sim","input":"x","max_output_tokens":0}`, 400, "invalid_value", "max_output_tokens", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, e, raw := postJSON(t, g, tt.path, tt.body)
			if status != tt.status || e == nil {
				t.Fatalf("status %d (%s), want %d", status, raw, tt.status)
			}
			if (tt.code != "" && e.Code != tt.code) || e.Param != tt.param || !strings.Contains(e.Message, tt.says) {
				t.Errorf("error %+v, want code %q, param %q, a message saying %q", *e, tt.code, tt.param, tt.says)
			}
		})
	}

	// GET /v1/models/{model}: the object, or 404 in OpenAI's format.
	for _, tt := range []struct {
		id     string
		status int
	}{{"sim", 200}, {"chatonly", 200}, {"nope", 404}, {"agent:none", 404}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url+"/v1/models/"+tt.id, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got struct {
			ID, Object string
			Error      *struct{ Code, Param string }
		}
		if err := json.Unmarshal(raw, &got); err != nil || resp.StatusCode != tt.status {
			t.Fatalf("GET /v1/models/%s: %d %s, want %d", tt.id, resp.StatusCode, raw, tt.status)
		}
		if tt.status == 200 && (got.ID != tt.id || got.Object != "model") {
			t.Errorf("GET /v1/models/%s: %s", tt.id, raw)
		}
		if tt.status == 404 && (got.Error == nil || got.Error.Code != "model_not_found" || got.Error.Param != "model") {
			t.Errorf("GET /v1/models/%s: %s, want model_not_found", tt.id, raw)
		}
	}
}

// TestEmbeddingsSpendCap: a capped key's embeddings are counted at the
// input price for the input tokens the answer reports, and a key over its
// cap is refused 429 budget_exceeded.
func TestEmbeddingsSpendCap(t *testing.T) {
	// $1 per thousand tokens: 15 tokens. The input, 40 bytes, is 10
	// tokens, estimated at 11 before the call.
	g := capGateway(t, 0.015)
	input := strings.Repeat("word ", 8)
	status, _, raw := postJSON(t, g, "/v1/embeddings", `{"model":"sim","input":"`+input+`"}`)
	if status != 200 {
		t.Fatalf("first call: %d %s", status, raw)
	}
	var ans struct {
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		}
	}
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Usage.PromptTokens != int64(sim.Tokens(len(input))) {
		t.Fatalf("answer usage %+v (%v), want %d tokens", ans.Usage, err, sim.Tokens(len(input)))
	}
	sp := g.srv.Spend()
	want := capPrice.Cost(llm.Usage{PromptTokens: ans.Usage.PromptTokens})
	if len(sp) != 1 || math.Abs(sp[0].Spent-want) > 1e-12 || sp[0].Reserved != 0 {
		t.Fatalf("spend %+v, want $%v spent and none reserved", sp, want)
	}
	// 10 tokens spent of 15: the next, of 11 at worst, is refused.
	status, e, raw := postJSON(t, g, "/v1/embeddings", `{"model":"sim","input":"`+input+`"}`)
	if status != http.StatusTooManyRequests || e == nil || e.Code != "budget_exceeded" {
		t.Fatalf("over the cap: %d %s, want 429 budget_exceeded", status, raw)
	}
}

// TestCompletionsForwardVerbatim: a legacy completion's body reaches an
// OpenAI-compatible upstream byte for byte but for its model (renamed to
// the backend's), its answer comes back byte for byte, and a streamed one
// event by event.
func TestCompletionsForwardVerbatim(t *testing.T) {
	var got []byte
	answer := `{"id":"cmpl-1","object":"text_completion","created":1,"model":"up","choices":[{"text":"hi","index":0,"logprobs":{"tokens":["hi"]},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3},"system_fingerprint":"fp_x","vendor":{"a":1}}`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		if r.URL.Path != "/v1/completions" {
			t.Errorf("upstream path %s", r.URL.Path)
		}
		if bytes.Contains(got, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"text\":\"h\",\"index\":0}]}\n\ndata: {\"choices\":[{\"text\":\"i\",\"index\":0}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(hs.Close)
	up := hs.URL
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"m": {Model: openaiBackend(t, up, ""), Name: "up"}},
		Keys:     []server.Key{{Name: "k", SHA256: server.HashKey(testKey)}},
	})
	status, _, raw := postJSON(t, g, "/v1/completions", `{"model":"m","prompt":"x","logprobs":3,"echo":false,"suffix":null,"top_k":5}`)
	if status != 200 || string(raw) != answer {
		t.Fatalf("answer %d %s, want %s", status, raw, answer)
	}
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(got, &sent); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"model": `"up"`, "prompt": `"x"`, "logprobs": "3", "echo": "false", "suffix": "null", "top_k": "5"} {
		if string(sent[k]) != v {
			t.Errorf("upstream got %s = %s, want %s (body %s)", k, sent[k], v, got)
		}
	}
	status, _, raw = postJSON(t, g, "/v1/completions", `{"model":"m","prompt":"x","stream":true}`)
	if want := "data: {\"choices\":[{\"text\":\"h\",\"index\":0}]}\n\ndata: {\"choices\":[{\"text\":\"i\",\"index\":0}]}\n\ndata: [DONE]\n\n"; status != 200 || string(raw) != want {
		t.Errorf("streamed %d %q, want %q", status, raw, want)
	}
}
