package batchagent_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

// otpmServer is an Anthropic Messages endpoint that enforces an
// output-token limit as Anthropic describes it: a bucket refilled evenly
// (rate tokens a second, holding at most capacity), a request refused with
// a 429 while the bucket holds less than one token, and each answer's
// output tokens taken from it once generated, which may leave it in debt.
// Every answer carries the requests, input-tokens and (when outputHeaders)
// output-tokens anthropic-ratelimit-* headers; the request and input
// limits are far above what the test uses.
type otpmServer struct {
	rate, capacity float64
	output         int // output tokens of every answer
	outputHeaders  bool

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	answered int
	refused  int
}

func (s *otpmServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if r.URL.Path != "/v1/messages" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	now := time.Now()
	if s.last.IsZero() {
		s.tokens = s.capacity
	} else {
		s.tokens = min(s.capacity, s.tokens+now.Sub(s.last).Seconds()*s.rate)
	}
	s.last = now
	ok := s.tokens >= 1
	if ok {
		s.tokens -= float64(s.output) // generated at once
		s.answered++
	} else {
		s.refused++
	}
	left, wait := max(0, math.Floor(s.tokens)), time.Duration((1-s.tokens)/s.rate*float64(time.Second))
	s.mu.Unlock()

	h := w.Header()
	reset := now.Add(time.Minute).UTC().Format(time.RFC3339)
	h.Set("anthropic-ratelimit-requests-limit", "1000000")
	h.Set("anthropic-ratelimit-requests-remaining", "999999")
	h.Set("anthropic-ratelimit-requests-reset", reset)
	h.Set("anthropic-ratelimit-input-tokens-limit", "100000000")
	h.Set("anthropic-ratelimit-input-tokens-remaining", "99999999")
	h.Set("anthropic-ratelimit-input-tokens-reset", reset)
	if s.outputHeaders {
		h.Set("anthropic-ratelimit-output-tokens-limit", strconv.Itoa(int(s.rate*60)))
		h.Set("anthropic-ratelimit-output-tokens-remaining", strconv.Itoa(int(left)))
		h.Set("anthropic-ratelimit-output-tokens-reset", now.Add(wait).UTC().Format(time.RFC3339))
	}
	if !ok {
		h.Set("retry-after-ms", strconv.Itoa(int(max(wait, time.Millisecond).Milliseconds())+1))
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of output tokens per minute."}}`)
		return
	}
	if !req.Stream {
		h.Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":%d}}`, s.output)
		return
	}
	h.Set("Content-Type", "text/event-stream")
	for _, ev := range [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, s.output)},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
	}
}

// runOTPM runs n single-call agents against srv through the Anthropic
// backend, four calls at most in flight, the first alone (so that every
// other is sent after the first answer), and returns the results.
func runOTPM(t *testing.T, srv *otpmServer, n int) []batchagent.Result {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	m, err := anthropic.New(anthropic.Config{BaseURL: hs.URL, APIKey: llm.Secret("sk-ant-test"), Model: "claude-test", HTTPClient: hs.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 4, WarmPrefix: true}},
		batchagent.Def{Model: m, Task: "answer {id}"}, batchagent.Slice(inputs(n)))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", i, r.Err)
		}
	}
	return res
}

// TestOutputTokenLimitFromHeaders: an Anthropic account whose output-token
// limit binds (3,000,000 a minute, 1000-token answers: 50 calls a second,
// a bucket of two answers) is paced from the output-token headers of its
// first answer on: no call after it meets a 429 (a few, on a loaded
// machine). Without those headers the same run meets five times as many
// and ten at the least (27 against 2 on a machine at load 30, where the
// blind run's calls are slow enough to meet fewer), so the pacing is what
// keeps them away.
func TestOutputTokenLimitFromHeaders(t *testing.T) {
	const n = 60
	paced := &otpmServer{rate: 50_000, capacity: 2000, output: 1000, outputHeaders: true}
	start := time.Now()
	runOTPM(t, paced, n)
	took := time.Since(start)
	// The server's bucket refills in real time and holds two answers: a
	// machine loaded enough to delay a paced call by 40 ms can still meet
	// one. A few such are timing, not pacing: the blind run below meets
	// dozens.
	if paced.refused > 3 || paced.answered != n {
		t.Errorf("with the output-token headers: %d answered, %d refused with a 429; want %d and at most 3", paced.answered, paced.refused, n)
	}
	// 59 answers after the first, 20 ms of output budget each.
	if took < 1100*time.Millisecond {
		t.Errorf("%d answers of 1000 tokens at 50,000 output tokens a second took %v, want at least 1.1s", n, took)
	}
	t.Logf("paced: %d calls in %v, %d refused", n, took, paced.refused)

	blind := &otpmServer{rate: 50_000, capacity: 2000, output: 1000}
	start = time.Now()
	runOTPM(t, blind, n)
	if blind.refused < max(10, 5*paced.refused) {
		t.Errorf("without the output-token headers %d calls met a 429 (%d answered in %v), with them %d: the server does not bind, or pacing does not help", blind.refused, blind.answered, time.Since(start), paced.refused)
	}
	t.Logf("unpaced: %d calls in %v, %d refused", n, time.Since(start), blind.refused)
}
