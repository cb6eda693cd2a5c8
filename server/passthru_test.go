package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// extraFields are the request fields the gateway does not read, each
// with a value as a client sends it, and what the Anthropic backend makes
// of it: the member of its request that carries it ("" when it refuses
// the field) and that member's value there.
var extraFields = []struct {
	name, value          string
	anthropic, translate string
}{
	{name: "logprobs", value: `true`},
	{name: "top_logprobs", value: `3`},
	{name: "frequency_penalty", value: `0.5`},
	{name: "presence_penalty", value: `-0.25`},
	{name: "logit_bias", value: `{"50256":-100,"1000":5}`},
	{name: "parallel_tool_calls", value: `false`, anthropic: "tool_choice", translate: `{"disable_parallel_tool_use":true,"type":"auto"}`},
	{name: "reasoning_effort", value: `"low"`},
	{name: "top_k", value: `40`, anthropic: "top_k", translate: `40`},
	{name: "guided_json", value: `{"type":"object","properties":{"a":{"type":"integer"}}}`},
	{name: "user", value: `"user-1"`, anthropic: "metadata", translate: `{"user_id":"user-1"}`},
	{name: "service_tier", value: `"flex"`},
	{name: "metadata", value: `{"k":"v"}`},
}

// capture is an upstream that records the bodies it is sent.
type capture struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *capture) record(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	return b
}

// last returns the members of the last body sent.
func (c *capture) last(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		t.Fatal("the upstream was sent nothing")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c.bodies[len(c.bodies)-1], &m); err != nil {
		t.Fatalf("upstream body %s: %v", c.bodies[len(c.bodies)-1], err)
	}
	return m
}

// Answer extras an OpenAI-compatible upstream sends: its system
// fingerprint, a vendor field, and logprobs on its choice (two tokens;
// streamed, one per chunk).
const (
	lpHi    = `{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}`
	lpThere = `{"token":" there","logprob":-1.25,"bytes":[32,116,104,101,114,101],"top_logprobs":[]}`
)

// openaiCapture is an OpenAI-compatible upstream that records requests
// and answers "Hi there" with extras, streamed or not as asked.
func openaiCapture(t testing.TB) (*capture, *httptest.Server) {
	c := &capture{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.Unmarshal(c.record(r), &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","system_fingerprint":"fp_42","vendor_stats":{"queue_ms":3},`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"logprobs":{"content":[`+lpHi+`,`+lpThere+`]},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ch := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_42","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":{"content":[` + lpHi + `]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_42","choices":[{"index":0,"delta":{"content":" there"},"logprobs":{"content":[` + lpThere + `]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_42","vendor_stats":{"queue_ms":3},"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		} {
			io.WriteString(w, "data: "+ch+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(hs.Close)
	return c, hs
}

// anthropicCapture is an Anthropic Messages upstream that records
// requests and streams "ok".
func anthropicCapture(t testing.TB) (*capture, *httptest.Server) {
	c := &capture{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.record(r)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []struct{ typ, data string }{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":5,"output_tokens":0}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.typ, ev.data)
		}
	}))
	t.Cleanup(hs.Close)
	return c, hs
}

// postChat sends body to the gateway's chat completions and returns the
// status and the answer.
func postChat(t testing.TB, g *gateway, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// withField is a one-message request to model with the field name set to
// value (and a tool, so that parallel_tool_calls means something).
func withField(model, name, value string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"hi"}],`+
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],%q:%s}`, model, stream, name, value)
}

// refusedParam returns the param of a 400 answer.
func refusedParam(t *testing.T, status int, body []byte) string {
	t.Helper()
	if status != http.StatusBadRequest {
		t.Fatalf("status %d (%s), want 400", status, body)
	}
	var e struct {
		Error struct{ Param, Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error.Param
}

// TestExtraFieldsPerBackend: each field the gateway does not read is
// forwarded byte-for-byte to an OpenAI-compatible upstream, streamed and
// not; translated for Anthropic where a translation exists and otherwise
// refused with 400 naming it; refused by the in-process simulator. None
// is dropped.
func TestExtraFieldsPerBackend(t *testing.T) {
	oaiUp, oaiSrv := openaiCapture(t)
	antUp, antSrv := anthropicCapture(t)
	ant, err := anthropic.New(anthropic.Config{BaseURL: antSrv.URL, APIKey: "sk-ant", Model: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{
		"oai":    {Model: genericBackend(t, oaiSrv.URL), Name: "oai"},
		"claude": {Model: ant, Name: "claude"},
		"sim":    {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"},
	}})
	for _, f := range extraFields {
		t.Run(f.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				if status, b := postChat(t, g, withField("oai", f.name, f.value, stream)); status != http.StatusOK {
					t.Fatalf("openai-compatible, stream %t: status %d: %s", stream, status, b)
				}
				if got := oaiUp.last(t)[f.name]; string(got) != f.value {
					t.Errorf("openai-compatible, stream %t: upstream got %s = %s, want %s byte-for-byte", stream, f.name, got, f.value)
				}
			}

			status, b := postChat(t, g, withField("claude", f.name, f.value, false))
			if f.anthropic == "" {
				if p := refusedParam(t, status, b); p != f.name {
					t.Errorf("anthropic: param %q, want %q", p, f.name)
				}
			} else {
				if status != http.StatusOK {
					t.Fatalf("anthropic: status %d: %s", status, b)
				}
				got := antUp.last(t)[f.anthropic]
				var gotV, wantV any
				_ = json.Unmarshal(got, &gotV)
				_ = json.Unmarshal([]byte(f.translate), &wantV)
				if fmt.Sprint(gotV) != fmt.Sprint(wantV) {
					t.Errorf("anthropic: %s became %s = %s, want %s", f.name, f.anthropic, got, f.translate)
				}
			}

			status, b = postChat(t, g, withField("sim", f.name, f.value, false))
			if p := refusedParam(t, status, b); p != f.name {
				t.Errorf("sim: param %q, want %q", p, f.name)
			}
		})
	}
}

// TestAnswerExtrasVerbatim: what an OpenAI-compatible upstream answers
// beyond the gateway's own members (logprobs, system_fingerprint, a
// vendor's field) reaches the client as it was sent: whole in a
// non-streamed answer, chunk by chunk in a stream.
func TestAnswerExtrasVerbatim(t *testing.T) {
	_, up := openaiCapture(t)
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"oai": {Model: genericBackend(t, up.URL), Name: "oai"}}})

	status, b := postChat(t, g, `{"model":"oai","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var c struct {
		SystemFingerprint string          `json:"system_fingerprint"`
		VendorStats       json.RawMessage `json:"vendor_stats"`
		Choices           []struct {
			Message  struct{ Content string }
			Logprobs json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if c.SystemFingerprint != "fp_42" || string(c.VendorStats) != `{"queue_ms":3}` {
		t.Errorf("system_fingerprint %q, vendor_stats %s; want fp_42 and {\"queue_ms\":3}", c.SystemFingerprint, c.VendorStats)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hi there" {
		t.Fatalf("choices %+v, want one with \"Hi there\"", c.Choices)
	}
	if want := `{"content":[` + lpHi + `,` + lpThere + `]}`; !jsonEqual(c.Choices[0].Logprobs, want) {
		t.Errorf("logprobs %s, want %s", c.Choices[0].Logprobs, want)
	}

	status, b = postChat(t, g, `{"model":"oai","stream":true,"logprobs":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK {
		t.Fatalf("stream: status %d: %s", status, b)
	}
	var lps []string
	fingerprints, vendor := 0, 0
	for line := range strings.Lines(string(b)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			SystemFingerprint string          `json:"system_fingerprint"`
			VendorStats       json.RawMessage `json:"vendor_stats"`
			Choices           []struct {
				Delta    struct{ Content string }
				Logprobs *struct{ Content []json.RawMessage }
			}
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if ch.SystemFingerprint == "fp_42" {
			fingerprints++
		}
		if len(ch.VendorStats) > 0 {
			vendor++
		}
		for _, choice := range ch.Choices {
			if choice.Logprobs != nil {
				for _, lp := range choice.Logprobs.Content {
					lps = append(lps, string(lp))
				}
			}
		}
	}
	if len(lps) != 2 || !jsonEqual([]byte(lps[0]), lpHi) || !jsonEqual([]byte(lps[1]), lpThere) {
		t.Errorf("streamed logprobs %q, want %s then %s", lps, lpHi, lpThere)
	}
	if fingerprints < 3 || vendor != 1 {
		t.Errorf("chunks with system_fingerprint %d (want ≥ 3), with vendor_stats %d (want 1):\n%s", fingerprints, vendor, b)
	}
}

func jsonEqual(a []byte, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// FuzzExtraFieldsForwarded sends random extra fields through the gateway
// to an OpenAI-compatible upstream: each arrives, byte-for-byte.
func FuzzExtraFieldsForwarded(f *testing.F) {
	f.Add("top_k", `40`, "guided_json", `{"type":"object"}`)
	f.Add("logit_bias", `{"1":-100}`, "x_vendor", `[1,"two",null,{"3":true}]`)
	f.Add("ünïcode", `"\u00e9"`, "a", `-1.5e3`)
	c, up := openaiCapture(f)
	m, err := backendopenai.New(backendopenai.Config{BaseURL: up.URL + "/v1", APIKey: "sk-upstream"})
	if err != nil {
		f.Fatal(err)
	}
	g := newGateway(f, server.Config{Backends: map[string]batchagent.Backend{"oai": {Model: m, Name: "oai"}}})
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		sent := map[string]string{}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}} {
			name, value := kv[0], strings.TrimSpace(kv[1])
			// A name that is not UTF-8 cannot be sent as itself (JSON
			// encoding makes it U+FFFD).
			if !json.Valid([]byte(value)) || name == "" || !utf8.ValidString(name) || known(name) || sent[name] != "" {
				continue
			}
			var compact bytes.Buffer
			if json.Compact(&compact, []byte(value)) != nil || compact.String() != value {
				continue // the body is compact: the value must be too to compare bytes
			}
			sent[name] = value
		}
		var body strings.Builder
		body.WriteString(`{"model":"oai","messages":[{"role":"user","content":"hi"}]`)
		for name, value := range sent {
			nb, _ := json.Marshal(name)
			fmt.Fprintf(&body, ",%s:%s", nb, value)
		}
		body.WriteString("}")
		if !json.Valid([]byte(body.String())) {
			return
		}
		status, b := postChat(t, g, body.String())
		if status != http.StatusOK {
			if status == http.StatusBadRequest && bytes.Contains(b, []byte("invalid_json")) {
				return // the gateway's own JSON checks (invalid UTF-8 in a name)
			}
			t.Fatalf("status %d: %s\nbody %s", status, b, body.String())
		}
		got := c.last(t)
		for name, value := range sent {
			if string(got[name]) != value {
				t.Errorf("%q: upstream got %s, want %s", name, got[name], value)
			}
		}
	})
}

// known reports whether name is a member the gateway reads itself.
func known(name string) bool {
	switch name {
	case "model", "messages", "tools", "tool_choice", "response_format", "max_tokens", "max_completion_tokens",
		"temperature", "top_p", "seed", "stop", "n", "stream", "stream_options":
		return true
	}
	return false
}
