package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/server"
)

// lpTwo is the logprobs of the second choice of nCapture's answer.
const lpTwo = `{"content":[{"token":"Yo","logprob":-2,"bytes":[89,111],"top_logprobs":[]}]}`

// nCapture is an OpenAI-compatible upstream that records requests and
// answers two choices, "Hi" and "Yo" (the second with logprobs and a
// vendor member), streamed or not as asked.
func nCapture(t testing.TB) (*capture, *httptest.Server) {
	c := &capture{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.Unmarshal(c.record(r), &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","system_fingerprint":"fp_n","choices":[`+
				`{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"},`+
				`{"index":1,"message":{"role":"assistant","content":"Yo"},"logprobs":`+lpTwo+`,"vendor_score":0.5,"finish_reason":"length"}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ch := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{"role":"assistant","content":"Yo"},"logprobs":` + lpTwo + `,"vendor_score":0.5,"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{},"finish_reason":"length"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`,
		} {
			io.WriteString(w, "data: "+ch+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(hs.Close)
	return c, hs
}

// nAnswer is what the tests read of an answer to n > 1.
type nAnswer struct {
	choices map[int]string // text by index
	finish  map[int]string // finish_reason by index
	extra   map[int]map[string]json.RawMessage
	usage   struct{ Prompt, Completion int64 }
	usages  int // usage objects seen (streamed: chunks with a usage)
}

// readN reads b, a completion or a stream, into an nAnswer.
func readN(t *testing.T, b []byte, stream bool) nAnswer {
	t.Helper()
	a := nAnswer{choices: map[int]string{}, finish: map[int]string{}, extra: map[int]map[string]json.RawMessage{}}
	type usage struct {
		Prompt     int64 `json:"prompt_tokens"`
		Completion int64 `json:"completion_tokens"`
	}
	read := func(data []byte) {
		var v struct {
			Choices []map[string]json.RawMessage
			Usage   *usage
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if v.Usage != nil {
			a.usage.Prompt, a.usage.Completion = v.Usage.Prompt, v.Usage.Completion
			a.usages++
		}
		for _, c := range v.Choices {
			var i int
			var body struct{ Content *string }
			var finish *string
			_ = json.Unmarshal(c["index"], &i)
			_ = json.Unmarshal(c["finish_reason"], &finish)
			_ = json.Unmarshal(c["message"], &body)
			_ = json.Unmarshal(c["delta"], &body)
			if body.Content != nil {
				a.choices[i] += *body.Content
			}
			if finish != nil {
				a.finish[i] = *finish
			}
			for k, v := range c {
				switch k {
				case "index", "finish_reason", "message", "delta":
					continue
				}
				if string(v) != "null" {
					if a.extra[i] == nil {
						a.extra[i] = map[string]json.RawMessage{}
					}
					a.extra[i][k] = v
				}
			}
		}
	}
	if !stream {
		read(b)
		return a
	}
	for line := range strings.Lines(string(b)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if ok && data != "[DONE]" {
			read([]byte(data))
		}
	}
	return a
}

// TestNOpenAICompatible: to an OpenAI-compatible upstream n goes on
// byte-for-byte, and every choice of its answer comes back with its
// index, finish_reason and members (logprobs, a vendor's), and the
// upstream's usage; streamed (each chunk with its choice's index) and
// not.
func TestNOpenAICompatible(t *testing.T) {
	up, srv := nCapture(t)
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"oai": {Model: genericBackend(t, srv.URL), Name: "oai"}}})
	for _, stream := range []bool{false, true} {
		body := `{"model":"oai","n":2,"messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"oai","n":2,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		status, b := postChat(t, g, body)
		if status != http.StatusOK {
			t.Fatalf("stream %t: status %d: %s", stream, status, b)
		}
		if got := up.last(t)["n"]; string(got) != "2" {
			t.Errorf("stream %t: upstream got n = %s, want 2", stream, got)
		}
		a := readN(t, b, stream)
		if a.choices[0] != "Hi" || a.choices[1] != "Yo" || len(a.choices) != 2 {
			t.Errorf("stream %t: choices %v, want 0: Hi, 1: Yo\n%s", stream, a.choices, b)
		}
		if a.finish[0] != "stop" || a.finish[1] != "length" {
			t.Errorf("stream %t: finish_reasons %v, want 0: stop, 1: length", stream, a.finish)
		}
		if !jsonEqual(a.extra[1]["logprobs"], lpTwo) {
			t.Errorf("stream %t: choice 1's logprobs %s, want %s", stream, a.extra[1]["logprobs"], lpTwo)
		}
		if string(a.extra[1]["vendor_score"]) != "0.5" {
			t.Errorf("stream %t: choice 1's vendor_score %s, want 0.5", stream, a.extra[1]["vendor_score"])
		}
		if a.usage.Prompt != 5 || a.usage.Completion != 4 || a.usages != 1 {
			t.Errorf("stream %t: usage %+v in %d objects, want the upstream's 5 + 4 once", stream, a.usage, a.usages)
		}
	}
}

// TestNFanOut: a backend that answers one choice a call (the in-process
// simulator, the simulator over HTTP, Anthropic) is called n times; the
// answer has choices 0..n-1 and their usage summed, streamed (one usage
// chunk) and not.
func TestNFanOut(t *testing.T) {
	simSrv, simURL := simHTTP(t, simhttp.Config{Model: sim.Config{Seed: 2}})
	antUp, antSrv := anthropicCapture(t)
	ant, err := anthropic.New(anthropic.Config{BaseURL: antSrv.URL, APIKey: "sk-ant", Model: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{
		"sim":      {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"},
		"sim-http": {Model: openaiBackend(t, simURL, ""), Name: "sim"},
		"claude":   {Model: ant, Name: "claude"},
	}})
	calls := map[string]func() int{
		"sim-http": func() int { return int(simSrv.Stats().Requests) },
		"claude": func() int {
			antUp.mu.Lock()
			defer antUp.mu.Unlock()
			return len(antUp.bodies)
		},
	}
	for _, model := range []string{"sim", "sim-http", "claude"} {
		for _, stream := range []bool{false, true} {
			one := func(n int) (nAnswer, []byte) {
				t.Helper()
				body := `{"model":"` + model + `","n":` + string(rune('0'+n)) + `,"stream":` + map[bool]string{false: "false", true: "true"}[stream] +
					`,"stream_options":` + map[bool]string{false: "null", true: `{"include_usage":true}`}[stream] + `,"messages":[{"role":"user","content":"hi"}]}`
				status, b := postChat(t, g, body)
				if status != http.StatusOK {
					t.Fatalf("%s, stream %t, n %d: status %d: %s", model, stream, n, status, b)
				}
				return readN(t, b, stream), b
			}
			single, _ := one(1)
			before := 0
			if c := calls[model]; c != nil {
				before = c()
			}
			a, b := one(3)
			if c := calls[model]; c != nil {
				if got := c() - before; got != 3 {
					t.Errorf("%s, stream %t: %d upstream calls for n=3, want 3", model, stream, got)
				}
			}
			if len(a.choices) != 3 {
				t.Fatalf("%s, stream %t: choices %v, want indexes 0, 1, 2\n%s", model, stream, a.choices, b)
			}
			for i := range 3 {
				if a.choices[i] == "" || a.finish[i] == "" {
					t.Errorf("%s, stream %t: choice %d: text %q, finish %q; want both", model, stream, i, a.choices[i], a.finish[i])
				}
			}
			if a.usages != 1 || a.usage.Prompt != 3*single.usage.Prompt || a.usage.Completion == 0 {
				t.Errorf("%s, stream %t: usage %+v in %d objects, want one with prompt 3 × %d", model, stream, a.usage, a.usages, single.usage.Prompt)
			}
			if model != "sim-http" && a.usage.Completion != 3*single.usage.Completion {
				t.Errorf("%s, stream %t: completion tokens %d, want 3 × %d", model, stream, a.usage.Completion, single.usage.Completion)
			}
		}
	}
}

// TestNRefused: n that is not an integer from 1 to 128 is refused with
// 400 naming n; so is n > 1 for an agent, which gives one answer.
func TestNRefused(t *testing.T) {
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}}})
	for _, n := range []string{`0`, `-1`, `129`, `"2"`, `1.5`} {
		status, b := postChat(t, g, `{"model":"sim","n":`+n+`,"messages":[{"role":"user","content":"hi"}]}`)
		if p := refusedParam(t, status, b); p != "n" {
			t.Errorf("n %s: param %q, want n (%s)", n, p, b)
		}
	}
	if status, b := postChat(t, g, `{"model":"sim","n":128,"messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
		t.Errorf("n 128: status %d: %s", status, b)
	}
}
