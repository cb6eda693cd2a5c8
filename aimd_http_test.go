package batchagent_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
)

// TestAIMDAgainstServer runs agents through the real OpenAI backend
// against a server that answers 429 whenever more than k requests are in
// flight: the adaptive limit settles near k and every agent succeeds.
func TestAIMDAgainstServer(t *testing.T) {
	const k = 6
	var (
		mu             sync.Mutex
		inflight, peak int
		served, denied int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if inflight >= k {
			denied++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"too many concurrent requests","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
			return
		}
		inflight++
		peak = max(peak, inflight)
		served++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inflight--
			mu.Unlock()
		}()
		time.Sleep(20 * time.Millisecond)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", Concurrency: 32})
	if err != nil {
		t.Fatal(err)
	}
	e, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 32}}, batchagent.Def{
		Model: m, Task: "{id}", MaxRetries: 50,
		Backoff: batchagent.Backoff{Base: time.Millisecond, RateLimitBase: 5 * time.Millisecond, Max: 50 * time.Millisecond},
	}, batchagent.Slice(inputs(300)))
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
	}
	st := e.Stats()
	t.Logf("k=%d: final limit %d after %d changes; server served %d, refused %d, peak %d", k, st.Limit, len(st.LimitHistory)-1, served, denied, peak)
	if st.Limit < k/2 || st.Limit > k+3 {
		t.Errorf("final limit = %d, want near k = %d", st.Limit, k)
	}
	if served != 300 || denied > 150 {
		t.Errorf("served %d refused %d, want 300 served and the refusals kept down", served, denied)
	}
}
