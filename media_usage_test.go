package batchagent_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// TestMediaTokensInResultsAndStats: a 1024×1024 image through sim://
// bills OpenAI's 765 tokens (4 tiles × 170 + 85), or Anthropic's 1,399
// (1024×1024/750, rounded up) on a simulator billing as Anthropic does: each result's
// Usage.MediaTokens says so, within its prompt tokens, and the engine's
// Stats sum them. A text-only job reports none.
func TestMediaTokensInResultsAndStats(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "big.png"), 1024, 1024)
	loader, err := media.NewLoader(media.LoaderConfig{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loader.Close() })
	ins := []batchagent.Input{{"photo": "big.png"}, {"photo": "big.png"}, {"photo": "big.png"}}
	for _, tc := range []struct {
		billing media.Billing
		per     int64
	}{{media.BillingOpenAI, 765}, {media.BillingAnthropic, 1399}} {
		t.Run(string(tc.billing), func(t *testing.T) {
			if got := int64(media.Tokens(&llm.Part{Kind: llm.PartImage, Width: 1024, Height: 1024}, tc.billing)); got != tc.per {
				t.Fatalf("media.Tokens = %d, want %d", got, tc.per)
			}
			m := newSim(t, sim.Config{MediaTokens: tc.billing})
			d := batchagent.Def{Model: m, Task: "Describe the photo.",
				Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{photo}"}}, MediaLoader: loader}
			e, rs := runWith(t, batchagent.Config{}, d, input.Slice(ins))
			var prompt int64
			for _, r := range rs {
				if r.Err != nil {
					t.Fatalf("input %d: %v", r.Index, r.Err)
				}
				if r.Usage.MediaTokens != tc.per*int64(r.ModelCalls) {
					t.Errorf("input %d: media tokens %d over %d calls, want %d a call", r.Index, r.Usage.MediaTokens, r.ModelCalls, tc.per)
				}
				if r.Usage.PromptTokens <= r.Usage.MediaTokens {
					t.Errorf("input %d: prompt tokens %d, want more than the media's %d (the task's text)", r.Index, r.Usage.PromptTokens, r.Usage.MediaTokens)
				}
				prompt += r.Usage.PromptTokens
			}
			st := e.Stats()
			if want := int64(len(ins)) * tc.per; st.Usage.MediaTokens != want || st.ModelCalls != int64(len(ins)) {
				t.Errorf("Stats: media tokens %d over %d calls, want %d over %d", st.Usage.MediaTokens, st.ModelCalls, want, len(ins))
			}
			if st.Usage.PromptTokens != prompt {
				t.Errorf("Stats: prompt tokens %d, want the results' %d", st.Usage.PromptTokens, prompt)
			}
		})
	}
	t.Run("text", func(t *testing.T) {
		e, rs := runWith(t, batchagent.Config{}, batchagent.Def{Model: newSim(t, sim.Config{}), Task: "Describe {photo}."}, input.Slice(ins))
		for _, r := range rs {
			if r.Usage.MediaTokens != 0 {
				t.Errorf("text input %d: media tokens %d, want 0", r.Index, r.Usage.MediaTokens)
			}
		}
		if n := e.Stats().Usage.MediaTokens; n != 0 {
			t.Errorf("Stats: media tokens %d for a text-only job, want 0", n)
		}
	})
}

// TestMediaTokensEstimated: a server that reports no media tokens (an
// OpenAI-compatible one sending an image) has them estimated by the agent
// from the request's image under the backend's billing, OpenAI's 765 for
// 1024×1024, at most the call's prompt tokens.
func TestMediaTokensEstimated(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "big.png"), 1024, 1024)
	loader, err := media.NewLoader(media.LoaderConfig{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loader.Close() })
	for _, tc := range []struct {
		prompt, want int64
	}{{2000, 765}, {500, 500}} {
		t.Run(strconv.FormatInt(tc.prompt, 10), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a mug"},"finish_reason":"stop"}],"usage":{"prompt_tokens":` +
					strconv.FormatInt(tc.prompt, 10) + `,"completion_tokens":3,"total_tokens":9}}`))
			}))
			t.Cleanup(srv.Close)
			m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			d := batchagent.Def{Model: m, Task: "Describe the photo.", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{photo}"}}, MediaLoader: loader}
			e, rs := runWith(t, batchagent.Config{}, d, input.Slice([]batchagent.Input{{"photo": "big.png"}}))
			if r := rs[0]; r.Err != nil || r.Usage.MediaTokens != tc.want || r.Usage.PromptTokens != tc.prompt {
				t.Errorf("result: err %v, usage %+v; want media tokens %d of %d", r.Err, r.Usage, tc.want, tc.prompt)
			}
			if got := e.Stats().Usage.MediaTokens; got != tc.want {
				t.Errorf("Stats: media tokens %d, want %d", got, tc.want)
			}
		})
	}
}
