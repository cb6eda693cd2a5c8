package batchagent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
	"github.com/google/go-cmp/cmp"
)

// storySchema is the schema of the real Ollama capture in testdata/wire.
const storySchema = `{"type":"object","properties":{"title":{"type":"string"},"mood":{"type":"string","enum":["happy","sad"]}},"required":["title","mood"],"additionalProperties":false}`

// endlessServer is an OpenAI-compatible server whose every answer never
// ends: a streamed one sends content chunks, a non-streamed one (stream
// false) a JSON body whose content string never closes. Each handler
// gives up after giveUp bytes, so that a client that keeps reading fails
// the test instead of hanging it.
type endlessServer struct {
	*httptest.Server
	written  sync.Map // request number → bytes written before the client went away
	requests atomic.Int64
	handlers sync.WaitGroup
}

const giveUp = 64 << 20

func newEndlessServer(t *testing.T, streamed bool) *endlessServer {
	t.Helper()
	s := &endlessServer{}
	chunk := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` +
		strings.Repeat("story ", 16) + `"},"finish_reason":null}]}` + "\n\n")
	body := []byte(strings.Repeat("story ", 1000))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		n := s.requests.Add(1)
		var written int64
		defer func() { s.written.Store(n, written) }()
		rc := http.NewResponseController(w)
		write := func(b []byte) bool {
			k, err := w.Write(b)
			written += int64(k)
			return err == nil && rc.Flush() == nil && r.Context().Err() == nil
		}
		if streamed {
			w.Header().Set("Content-Type", "text/event-stream")
			for written < giveUp && write(chunk) {
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)) {
			return
		}
		for written < giveUp && write(body) {
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// TestEndlessAnswerTruncated runs two agents against a server whose
// answers never end, streamed or as one endless JSON body (a server that
// ignores "stream"): each call stops reading near the answer's size cap
// (llm.AnswerLimit of max_tokens 48, or llm.BodyLimit for a body) and
// fails with KindTruncated, without a retry; the server's handlers see the
// client go away. Before the size cap, the client read until the server
// gave up (64 MiB per agent) and failed with KindBackend.
func TestEndlessAnswerTruncated(t *testing.T) {
	for _, tt := range []struct {
		name     string
		streamed bool
		limit    int64 // bytes of the answer or body the client may hold
	}{
		{"stream", true, int64(llm.AnswerLimit(48))},
		{"json body", false, llm.BodyLimit(48)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newEndlessServer(t, tt.streamed)
			m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			results, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{Model: m, Task: "Tell story {id}.", MaxTokens: 48}),
				batchagent.Slice(inputs(2)))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range results {
				if k := batchagent.KindOf(r.Err); k != batchagent.KindTruncated || !errors.Is(r.Err, llm.ErrTruncated) {
					t.Errorf("result %d: kind %q, err %v; want kind truncated", r.Index, k, r.Err)
				} else if !strings.Contains(r.Err.Error(), "size cap (max_tokens 48)") {
					t.Errorf("result %d: error %q does not name the size cap", r.Index, r.Err)
				}
				if r.ModelCalls != 1 {
					t.Errorf("result %d: %d attempts, want 1: a cut-off endless answer is not retried", r.Index, r.ModelCalls)
				}
			}
			srv.handlers.Wait() // every handler returned: the client closed its connections
			if n := srv.requests.Load(); n != 2 {
				t.Errorf("server got %d requests, want 2", n)
			}
			// What the handler wrote beyond what the client read sits in
			// the loopback socket buffers: a few MiB at most.
			bound := 3*tt.limit + 8<<20
			srv.written.Range(func(k, v any) bool {
				w := v.(int64)
				t.Logf("request %d: server wrote %d bytes before the client went away (client cap %d)", k, w, tt.limit)
				if w > bound {
					t.Errorf("request %d: server wrote %d bytes, want the client to stop reading near its cap %d (at most %d)", k, w, tt.limit, bound)
				}
				return true
			})
		})
	}
}

// wireRequest is what truncation tests read of a chat-completions request.
type wireRequest struct {
	MaxTokens int           `json:"max_tokens"`
	Messages  []llm.Message `json:"messages"`
}

// recordingServer answers with answer(n, request) and records the
// requests it got, in order.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []wireRequest // guarded by mu
}

func newRecordingServer(t *testing.T, answer func(n int, req wireRequest) []byte) *recordingServer {
	t.Helper()
	s := &recordingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wireRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		n := len(s.reqs)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(answer(n, req))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *recordingServer) requests() []wireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireRequest(nil), s.reqs...)
}

func (s *recordingServer) maxTokens() []int {
	var out []int
	for _, r := range s.requests() {
		out = append(out, r.MaxTokens)
	}
	return out
}

// ollamaCut returns the SSE body of a real Ollama 0.17.4 answer cut off at
// max_tokens 48 under a json_schema response format: finish_reason
// "length", 48 completion tokens, the JSON value unfinished.
func ollamaCut(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/wire/ollama-chat-json-schema-stream.response")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok || !bytes.Contains(body, []byte(`"finish_reason":"length"`)) {
		t.Fatal("capture: no header/body separator or no finish_reason length")
	}
	return body
}

const fullStory = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"stories","choices":[{"index":0,"delta":{"role":"assistant","content":"{\"title\":\"A fish\",\"mood\":\"happy\"}"},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"stories","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":95,"completion_tokens":12,"total_tokens":107}}

data: [DONE]

`

// TestLengthRetriedWithLargerBudget: an answer cut at max_tokens
// (finish_reason length, a real Ollama stream) is not resent unchanged:
// each retry doubles max_tokens and asks for a shorter answer, and the
// answer given in full at the larger budget is the result, with the
// truncations counted. Before the fix the cut JSON went to validation and
// the same request was sent again.
func TestLengthRetriedWithLargerBudget(t *testing.T) {
	cut := ollamaCut(t)
	srv := newRecordingServer(t, func(n int, req wireRequest) []byte {
		if req.MaxTokens < 192 {
			return cut
		}
		return []byte(fullStory)
	})
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "stories", Flavor: openai.FlavorOllama})
	if err != nil {
		t.Fatal(err)
	}
	results, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: m, System: "You are a storyteller.", Task: "Story about a {id}.", OutputSchema: json.RawMessage(storySchema), MaxTokens: 48,
	}), batchagent.Slice([]batchagent.Input{{"id": "fish"}}))
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.Err != nil {
		t.Fatalf("result: %v", r.Err)
	}
	if got, want := string(r.Output), `{"title":"A fish","mood":"happy"}`; got != want {
		t.Errorf("output = %s, want %s", got, want)
	}
	if r.Truncations != 2 || r.ModelCalls != 3 {
		t.Errorf("truncations %d, attempts %d; want 2 and 3", r.Truncations, r.ModelCalls)
	}
	if diff := cmp.Diff([]int{48, 96, 192}, srv.maxTokens()); diff != "" {
		t.Errorf("max_tokens sent (-want +got):\n%s", diff)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// The second request holds the cut answer and the request for a
	// shorter one after the task.
	msgs := reqs[1].Messages
	if len(msgs) != 4 || msgs[2].Role != llm.RoleAssistant || !strings.HasPrefix(msgs[2].Content, `{ "title" : "I will be your friend`) ||
		msgs[3].Role != llm.RoleUser || !strings.Contains(msgs[3].Content, "cut off at 48 tokens") || !strings.Contains(msgs[3].Content, "shorter") {
		t.Errorf("second request's messages = %+v, want system, task, the cut answer and a request for a shorter answer", msgs)
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"truncations":2`)) {
		t.Errorf("result JSON %s has no \"truncations\":2", b)
	}
}

// TestAlwaysTruncated: a server that stops every answer at 48 tokens
// whatever max_tokens says (Ollama's num_predict) fails the input with
// KindTruncated and a message saying what was tried, after the
// corrections; the cut answer is kept as the raw text.
func TestAlwaysTruncated(t *testing.T) {
	cut := ollamaCut(t)
	srv := newRecordingServer(t, func(int, wireRequest) []byte { return cut })
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "stories", Flavor: openai.FlavorOllama})
	if err != nil {
		t.Fatal(err)
	}
	results, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: m, Task: "Story about a {id}.", OutputSchema: json.RawMessage(storySchema), MaxTokens: 48,
	}), batchagent.Slice([]batchagent.Input{{"id": "fish"}}))
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	ae, ok := errors.AsType[*batchagent.AgentError](r.Err)
	if !ok || ae.Kind != batchagent.KindTruncated {
		t.Fatalf("result error = %v, want an *AgentError of kind truncated", r.Err)
	}
	const want = "answer cut at 48 tokens (finish_reason length) 3 times; max_tokens raised 48→96→192"
	if got := ae.Err.Error(); got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if te, ok := errors.AsType[*agent.TruncatedError](r.Err); !ok || !cmp.Equal(te.MaxTokens, []int{48, 96, 192}) {
		t.Errorf("error %v: want a *agent.TruncatedError with MaxTokens [48 96 192]", r.Err)
	}
	if r.Truncations != 3 || r.ModelCalls != 3 || !strings.HasPrefix(r.Raw, `{ "title" : "I will`) {
		t.Errorf("truncations %d, attempts %d, raw %q; want 3, 3 and the cut answer", r.Truncations, r.ModelCalls, r.Raw)
	}
	if diff := cmp.Diff([]int{48, 96, 192}, srv.maxTokens()); diff != "" {
		t.Errorf("max_tokens sent (-want +got):\n%s", diff)
	}
}

// TestDefaultMaxTokensSent: a job that sets no MaxTokens still sends
// max_tokens (DefaultMaxTokens) with every call. Before the fix the
// request had none, and a server could generate without end.
func TestDefaultMaxTokensSent(t *testing.T) {
	srv := newRecordingServer(t, func(int, wireRequest) []byte { return []byte(fullStory) })
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "stories", Flavor: openai.FlavorOllama})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{Model: m, Task: "{id}"}), batchagent.Slice(inputs(2))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{batchagent.DefaultMaxTokens, batchagent.DefaultMaxTokens}, srv.maxTokens()); diff != "" {
		t.Errorf("max_tokens sent (-want +got):\n%s", diff)
	}
}
