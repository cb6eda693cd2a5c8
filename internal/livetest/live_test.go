package livetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// The tiny model decodes slowly on a loaded machine: every call is short,
// and each test bounds itself with callTimeout so that a server that stops
// answering fails the test instead of hanging it.
const (
	shortTokens = 16
	callTimeout = 90 * time.Second
	// wordSchema is an answer even a tiny model satisfies under a grammar;
	// maxLength keeps the constrained answer from running on.
	wordSchema = `{"type":"object","properties":{"word":{"type":"string","minLength":1,"maxLength":12}},"required":["word"],"additionalProperties":false}`
)

// server is the live server the environment names.
type server struct {
	url      string
	model    string
	parallel int // the server's parallel sequences
	numCtx   int // each sequence's context, in tokens; 0 when unknown
}

// liveServer returns the server BATCHAGENT_LIVE_URL names, or skips the
// test when it is unset.
func liveServer(t *testing.T) server {
	t.Helper()
	s := server{url: os.Getenv("BATCHAGENT_LIVE_URL"), model: os.Getenv("BATCHAGENT_LIVE_MODEL"), parallel: 4}
	if s.url == "" {
		t.Skip("BATCHAGENT_LIVE_URL is unset: run the live tests against a real server with scripts/ollama run -- go test -run Live ./internal/livetest")
	}
	if s.model == "" {
		t.Fatal("BATCHAGENT_LIVE_URL is set but BATCHAGENT_LIVE_MODEL is not: name the model the server serves")
	}
	for name, dst := range map[string]*int{"BATCHAGENT_LIVE_PARALLEL": &s.parallel, "BATCHAGENT_LIVE_NUM_CTX": &s.numCtx} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s = %q: want a positive integer", name, v)
			}
			*dst = n
		}
	}
	return s
}

// inflightTransport counts the requests in flight and the most at once.
type inflightTransport struct {
	base     http.RoundTripper
	now, max atomic.Int64
	requests atomic.Int64
}

func (t *inflightTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	n := t.now.Add(1)
	for {
		m := t.max.Load()
		if n <= m || t.max.CompareAndSwap(m, n) {
			break
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.now.Add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { t.now.Add(-1) }}
	return resp, nil
}

// countedBody calls done once, when the body is closed.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// newModel is the OpenAI backend for s, its requests counted by tr when
// tr is not nil.
func newModel(t *testing.T, s server, tr *inflightTransport) *openai.Model {
	t.Helper()
	cfg := openai.Config{BaseURL: s.url, Model: s.model, Flavor: openai.FlavorOllama}
	if tr != nil {
		tr.base = http.DefaultTransport.(*http.Transport).Clone()
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("openai.New(%s): %v", s.url, err)
	}
	return m
}

func userRequest(text string, maxTokens int) *llm.Request {
	return &llm.Request{
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: text}},
		MaxTokens: maxTokens,
	}
}

// TestLiveStream streams one short answer: text arrives in several events,
// and the accumulated response has the text, a finish reason and the
// server's token counts, which Generate reports alike.
func TestLiveStream(t *testing.T) {
	s := liveServer(t)
	m := newModel(t, s, nil)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()

	var (
		acc   llm.Accumulator
		texts int
	)
	for ev, err := range m.Stream(ctx, userRequest("Once upon a time", shortTokens)) {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if ev.Type == llm.EventText && ev.Text != "" {
			texts++
		}
		if err := acc.Add(ev); err != nil {
			t.Fatalf("Accumulator.Add(%+v): %v", ev, err)
		}
	}
	resp := acc.Response()
	if texts < 2 || resp.Message.Content == "" {
		t.Errorf("%d text events, content %q: want a streamed answer in several events", texts, resp.Message.Content)
	}
	if resp.FinishReason != llm.FinishLength && resp.FinishReason != llm.FinishStop {
		t.Errorf("finish reason %q, want length or stop", resp.FinishReason)
	}
	if u := resp.Usage; u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.CompletionTokens > shortTokens {
		t.Errorf("usage %+v: want prompt > 0 and 0 < completion <= %d", u, shortTokens)
	}

	got, err := m.Generate(ctx, userRequest("Once upon a time", shortTokens))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got.Message.Content == "" || got.Usage.CompletionTokens <= 0 || got.Usage.PromptTokens != resp.Usage.PromptTokens {
		t.Errorf("Generate = %q usage %+v; want text and the stream's prompt tokens %d", got.Message.Content, got.Usage, resp.Usage.PromptTokens)
	}
}

// TestLiveResponseFormat asks for a json_schema answer, streamed and not:
// the server constrains the model by a grammar, so every answer parses
// and validates.
func TestLiveResponseFormat(t *testing.T) {
	s := liveServer(t)
	m := newModel(t, s, nil)
	sch, err := schema.Compile(json.RawMessage(wordSchema))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	for _, stream := range []bool{false, true} {
		for i := range 2 {
			req := userRequest(fmt.Sprintf("Name toy %d in one word. Reply in JSON.", i), 64)
			req.Output = &llm.OutputSpec{Name: "word", Schema: sch.Raw()}
			var resp *llm.Response
			if stream {
				var acc llm.Accumulator
				for ev, err := range m.Stream(ctx, req) {
					if err != nil {
						t.Fatalf("Stream %d: %v", i, err)
					}
					if err := acc.Add(ev); err != nil {
						t.Fatal(err)
					}
				}
				resp = acc.Response()
			} else if resp, err = m.Generate(ctx, req); err != nil {
				t.Fatalf("Generate %d: %v", i, err)
			}
			if _, err := sch.Parse(resp.Message.Content); err != nil {
				t.Errorf("stream %v answer %d %q (finish %q): %v", stream, i, resp.Message.Content, resp.FinishReason, err)
			}
		}
	}
}

// TestLiveCancelFreesSlot cancels as many long generations as the server
// has parallel sequences, once each has started answering, then runs as
// many short calls at once. Were a cancelled generation to keep its slot,
// the short calls would wait behind answers of a million tokens and the
// deadline would end them; freed slots answer them all.
func TestLiveCancelFreesSlot(t *testing.T) {
	s := liveServer(t)
	tr := &inflightTransport{}
	m := newModel(t, s, tr)

	longCtx, cancelLong := context.WithCancel(t.Context())
	started := make(chan struct{}, s.parallel)
	var wg sync.WaitGroup
	for i := range s.parallel {
		wg.Go(func() {
			req := userRequest(fmt.Sprintf("Tell the longest story you know, number %d.", i), 1_000_000)
			first := true
			for _, err := range m.Stream(longCtx, req) {
				if err != nil {
					break
				}
				if first {
					first = false
					started <- struct{}{}
				}
			}
			if first {
				started <- struct{}{} // it ended without a token: do not wait for it
			}
		})
	}
	deadline := time.After(callTimeout)
	for range s.parallel {
		select {
		case <-started:
		case <-deadline:
			cancelLong()
			wg.Wait()
			t.Fatalf("the %d long generations did not all start within %v", s.parallel, callTimeout)
		}
	}
	cancelLong()
	wg.Wait()
	if n := tr.now.Load(); n != 0 {
		t.Errorf("%d requests still open after cancelling", n)
	}

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	start := time.Now()
	errs := make([]error, s.parallel)
	for i := range s.parallel {
		wg.Go(func() {
			_, errs[i] = m.Generate(ctx, userRequest("Once upon a time", 8))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("short call %d after cancelling %d long ones: %v", i, s.parallel, err)
		}
	}
	t.Logf("%d short calls after cancelling %d long generations answered in %v", s.parallel, s.parallel, time.Since(start).Round(time.Millisecond))
}

// TestLiveEngineInflight runs the engine with max_inflight below and above
// the server's parallel sequences: every agent ends ok (a grammar-bound
// answer, which ends where its JSON closes: the story model's free text
// would run on to max_tokens, an answer the engine counts as cut), and no more calls
// are in flight at once than the limit (above it, the server queues the
// surplus itself).
func TestLiveEngineInflight(t *testing.T) {
	s := liveServer(t)
	for _, limit := range []int{max(s.parallel/2, 1), 2 * s.parallel} {
		t.Run(fmt.Sprintf("max_inflight=%d", limit), func(t *testing.T) {
			tr := &inflightTransport{}
			m := newModel(t, s, tr)
			n := limit + 2
			eng, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: limit, FixedInflight: true}})
			if err != nil {
				t.Fatal(err)
			}
			spec, err := batchagent.NewSpec(batchagent.Def{ID: "inflight", Model: m, Task: "Name {name} in one word.",
				OutputSchema: json.RawMessage(wordSchema), MaxTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			inputs := make([]batchagent.Input, n)
			for i := range inputs {
				inputs[i] = batchagent.Input{"name": fmt.Sprintf("toy %d", i)}
			}
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			results, err := eng.Run(ctx, spec, batchagent.Slice(inputs))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			ok := 0
			for _, r := range results {
				if r.Err != nil {
					t.Errorf("agent %d: %v", r.Index, r.Err)
				} else if len(r.Output) == 0 || r.Usage.CompletionTokens <= 0 {
					t.Errorf("agent %d: output %s usage %+v: want an answer and completion tokens", r.Index, r.Output, r.Usage)
				} else {
					ok++
				}
			}
			if ok != n {
				t.Errorf("%d of %d agents ok", ok, n)
			}
			if got := tr.max.Load(); got > int64(limit) || got < 1 {
				t.Errorf("at most %d requests in flight at once, want within [1, %d]", got, limit)
			}
			t.Logf("%d agents, max_inflight %d against %d server sequences: %d requests, at most %d at once", n, limit, s.parallel, tr.requests.Load(), tr.max.Load())
		})
	}
}

// TestLiveLongPrompt sends a prompt several times longer than a sequence's
// context: the engine must end with a clear result (an answer to the cut
// prompt, or an error saying why) before the deadline, not hang. Ollama
// cuts the prompt to num_ctx and answers; a server that refuses it must
// say so in the error.
func TestLiveLongPrompt(t *testing.T) {
	s := liveServer(t)
	m := newModel(t, s, nil)
	eng, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "long", Model: m, Task: "{text}\nNow tell a short story.", MaxTokens: shortTokens, NoRetries: true})
	if err != nil {
		t.Fatal(err)
	}
	words := 4000
	if s.numCtx > 0 {
		words = 4 * s.numCtx
	}
	long := strings.Repeat("the cat sat on the mat and ", words/7+1)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	results, err := eng.Run(ctx, spec, batchagent.Slice([]batchagent.Input{{"text": long}}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the long prompt was not answered within %v: %v", callTimeout, ctx.Err())
	}
	r := results[0]
	switch {
	case r.Err != nil:
		if msg := r.Err.Error(); !strings.Contains(strings.ToLower(msg), "context") && !strings.Contains(strings.ToLower(msg), "token") {
			t.Errorf("the long prompt failed with %q: want an error naming the context or tokens", msg)
		}
	case r.Raw == "":
		t.Errorf("the long prompt ended ok with no answer: usage %+v", r.Usage)
	case s.numCtx > 0 && r.Usage.PromptTokens > int64(s.numCtx):
		t.Errorf("prompt tokens %d > num_ctx %d: the server answered a prompt it cannot hold", r.Usage.PromptTokens, s.numCtx)
	}
	t.Logf("prompt of %d words: err %v, prompt tokens %d, completion %d", words, r.Err, r.Usage.PromptTokens, r.Usage.CompletionTokens)
}
