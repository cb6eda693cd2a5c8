package admission_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// The pacing learnt from a hosted API's rate-limit headers, end to end:
// an engine with no rate limit configured runs agents against a server
// that enforces a limit and reports it in its headers; after the first
// answer, the engine sends at the reported rate and meets no 429.

// arrivals records when a server received each model call and how it
// was answered.
type arrivals struct {
	mu          sync.Mutex
	firstAnswer time.Time
	ok, limited []time.Time
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if r.Method != http.MethodPost {
			return // the queue probe's /metrics
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		switch rec.status {
		case http.StatusOK:
			a.ok = append(a.ok, at)
			if a.firstAnswer.IsZero() {
				a.firstAnswer = time.Now()
			}
		case http.StatusTooManyRequests:
			a.limited = append(a.limited, at)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	set    bool
}

// Flush passes streamed answers through.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.set {
		s.status, s.set = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

// check asserts that no call that arrived after the first answer was
// refused, and that those calls came at no more than perMinute (with
// slack for the calls sent before the limit was known).
func (a *arrivals) check(t *testing.T, perMinute int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.limited {
		if at.After(a.firstAnswer) {
			t.Errorf("a call that arrived %v after the first answer was answered 429", at.Sub(a.firstAnswer))
		}
	}
	var n int
	var last time.Time
	for _, at := range a.ok {
		if at.After(a.firstAnswer) {
			n++
			last = at
		}
	}
	if n < 10 {
		t.Fatalf("%d calls after the first answer, want at least 10", n)
	}
	got := float64(n-1) / last.Sub(a.firstAnswer).Minutes()
	if got > 1.15*float64(perMinute) {
		t.Errorf("%d calls after the first answer came at %.0f a minute, want at most the reported %d (+15%%): the headers did not pace them", n, got, perMinute)
	}
}

// runAgents runs n single-call agents on m and checks each is ok; it
// returns the engine's stats.
func runAgents(t *testing.T, m llm.Model, n int) batchagent.Stats {
	t.Helper()
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "rl", Model: m, Task: "Describe item {id}.", MaxTokens: 512, MaxRetries: 8})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := batchagent.New(batchagent.Config{MaxActive: n})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Shutdown(context.Background())
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"id": i}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := eng.Run(ctx, spec, batchagent.Slice(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("input %d: %v", r.Index, r.Err)
		}
	}
	return eng.Stats()
}

// TestPacingFromOpenAIHeaders: the HTTP simulator enforces 1,200 requests
// a minute with OpenAI's x-ratelimit-* headers.
func TestPacingFromOpenAIHeaders(t *testing.T) {
	const rpm = 1200
	srv, err := simhttp.New(simhttp.Config{Model: sim.Config{ToolTurns: -1, Seed: 1}, MaxSeqs: 64, MaxQueue: -1,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: time.Microsecond,
		RPM: rpm, TPM: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	var a arrivals
	ts := httptest.NewServer(a.wrap(srv))
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	m, err := openai.New(openai.Config{Flavor: openai.FlavorSim, BaseURL: ts.URL + "/v1", Model: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	st := runAgents(t, m, 60)
	a.check(t, rpm)
	if st.RateLimits.RPM != rpm || st.RateLimits.TPM != 200_000 {
		t.Errorf("pacing at %d rpm, %d tpm; want the reported %d and 200000", st.RateLimits.RPM, st.RateLimits.TPM, rpm)
	}
}

// anthropicServer answers the Messages API, enforcing perMinute requests
// with a bucket of burst, and reports them in anthropic-ratelimit-*
// headers (resets as RFC 3339 instants).
func anthropicServer(perMinute, burst int) http.Handler {
	lim := rate.NewLimiter(rate.Limit(float64(perMinute)/60), burst)
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now := time.Now()
		ok := lim.AllowN(now, 1)
		left := math.Max(lim.TokensAt(now), 0)
		mu.Unlock()
		h := w.Header()
		h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(perMinute))
		h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(int(left)))
		full := time.Duration((float64(burst) - left) * float64(time.Minute) / float64(perMinute))
		h.Set("anthropic-ratelimit-requests-reset", now.Add(full).UTC().Format(time.RFC3339Nano))
		if !ok {
			h.Set("Content-Type", "application/json")
			h.Set("retry-after", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			h.Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"An item."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}}`)
			return
		}
		h.Set("Content-Type", "text/event-stream")
		for _, ev := range [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"An item."}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
		}
	})
}

// TestPacingFromAnthropicHeaders: a Messages server enforcing 1,200
// requests a minute with a burst of 20 (a second's budget), reporting it
// with anthropic-ratelimit-* headers.
func TestPacingFromAnthropicHeaders(t *testing.T) {
	const rpm = 1200
	var a arrivals
	ts := httptest.NewServer(a.wrap(anthropicServer(rpm, 20)))
	defer ts.Close()
	m, err := anthropic.New(anthropic.Config{BaseURL: ts.URL, Model: "claude-test", APIKey: "sk-ant-test", HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	st := runAgents(t, m, 60)
	a.check(t, rpm)
	if st.RateLimits.RPM != rpm {
		t.Errorf("pacing at %d rpm, want the reported %d", st.RateLimits.RPM, rpm)
	}
}
