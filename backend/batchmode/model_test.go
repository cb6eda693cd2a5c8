package batchmode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// simServer is the HTTP simulator with its Batch API, each batch taking
// delay at the least, served until the test ends.
type simServer struct {
	*simhttp.Server
	url string
}

func startSim(t *testing.T, delay time.Duration, cfg simhttp.Config) *simServer {
	t.Helper()
	cfg.Model.ToolTurns = -1
	cfg.Batch, cfg.BatchDelay = true, delay
	s, err := simhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim Run: %v", err)
		}
	})
	return &simServer{Server: s, url: hs.URL}
}

// provider returns the OpenAI batch provider of the server at base.
func provider(t *testing.T, base string) *openai.Batch {
	t.Helper()
	u, _ := url.Parse(base)
	cfg, err := openai.ParseURL("sim+http://" + u.Host + "/v1?mode=batch")
	if err != nil {
		t.Fatal(err)
	}
	p, err := openai.NewBatch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// quick is a Model's settings for tests: quick rounds.
func quick(journal string) batchmode.Config {
	return batchmode.Config{Journal: journal, Linger: 50 * time.Millisecond, PollEvery: 20 * time.Millisecond}
}

// exactly is quick with submissions of n calls, whatever the machine's
// load: an hour's linger.
func exactly(journal string, n int) batchmode.Config {
	cfg := quick(journal)
	cfg.Linger, cfg.MinLines = time.Hour, n
	return cfg
}

func newModel(t *testing.T, p batchmode.Provider, cfg batchmode.Config) *batchmode.Model {
	t.Helper()
	m, err := batchmode.New(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func question(i int) *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("question %d", i)}}, MaxTokens: 16}
}

// ask calls m.Generate for each request at once and returns the answers'
// texts, failing the test on an error.
func ask(t *testing.T, ctx context.Context, m llm.Model, reqs ...*llm.Request) []string {
	t.Helper()
	out := make([]string, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			resp, err := m.Generate(ctx, r)
			if err != nil {
				errs[i] = err
				return
			}
			if resp.Usage.PromptTokens == 0 {
				errs[i] = fmt.Errorf("answer %d has no usage", i)
			}
			out[i] = resp.Message.Content
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestModelAnswersThroughOneBatch(t *testing.T) {
	s := startSim(t, 100*time.Millisecond, simhttp.Config{})
	m := newModel(t, provider(t, s.url), exactly(filepath.Join(t.TempDir(), "j.db"), 20))
	var reqs []*llm.Request
	for i := range 20 {
		reqs = append(reqs, question(i))
	}
	for range 5 { // the same request five more times: one line
		reqs = append(reqs, question(0))
	}
	got := ask(t, t.Context(), m, reqs...)
	for i := 20; i < 25; i++ {
		if got[i] != got[0] {
			t.Errorf("answer %d = %q, want the answer to the same request %q", i, got[i], got[0])
		}
	}
	if st := s.BatchStats(); st.Batches != 1 || st.Lines != 20 || st.DuplicateSubmissions != 0 {
		t.Errorf("endpoint received %+v, want 1 batch of 20 lines", st)
	}
	if st := m.Stats(); st.Submissions != 1 || st.Lines != 20 {
		t.Errorf("Stats = %+v, want 1 submission of 20 lines", st)
	}
	if c := m.Capabilities(); c.Streaming || c.DefaultConcurrency < batchmode.DefaultConcurrency {
		t.Errorf("Capabilities = %+v, want no streaming and a concurrency of a batch", c)
	}
}

// TestModelMinLines: with an hour's linger, a submission goes out as
// soon as MinLines calls wait, not before; a call given up before its
// submission went out is never sent.
func TestModelMinLines(t *testing.T) {
	s := startSim(t, 50*time.Millisecond, simhttp.Config{})
	cfg := quick(filepath.Join(t.TempDir(), "j.db"))
	cfg.Linger, cfg.MinLines = time.Hour, 4
	m := newModel(t, provider(t, s.url), cfg)
	ask(t, t.Context(), m, question(0), question(1), question(2), question(3))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	for i := 4; i < 7; i++ {
		if _, err := m.Generate(ctx, question(i)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call %d of 3 waiting = %v, want DeadlineExceeded (no submission below MinLines)", i, err)
		}
	}
	ask(t, t.Context(), m, question(7), question(8), question(9), question(10))
	if st := s.BatchStats(); st.Batches != 2 || st.Lines != 8 {
		t.Errorf("endpoint received %+v, want 2 batches of 4 lines: the given-up calls never sent", st)
	}
}

func TestModelEnqueuedTokenCap(t *testing.T) {
	s := startSim(t, 50*time.Millisecond, simhttp.Config{})
	cfg := quick(filepath.Join(t.TempDir(), "j.db"))
	cfg.CountTokens = func(*llm.Request) int { return 100 }
	cfg.MaxEnqueuedTokens = 250 // two calls' tokens at once
	m := newModel(t, provider(t, s.url), cfg)
	var (
		reqs    []*llm.Request
		running atomic.Int64
		most    atomic.Int64
	)
	for i := range 6 {
		reqs = append(reqs, question(i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the lines in batches not ended, as the endpoint sees them
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			st := m.Stats()
			n := int64(st.Lines) - running.Load()
			if n > most.Load() {
				most.Store(n)
			}
		}
	})
	var done sync.WaitGroup
	for _, r := range reqs {
		done.Go(func() {
			if _, err := m.Generate(t.Context(), r); err != nil {
				t.Error(err)
			}
			running.Add(1)
		})
	}
	done.Wait()
	close(stop)
	wg.Wait()
	if st := s.BatchStats(); st.Batches < 3 || st.Lines != 6 {
		t.Errorf("endpoint received %+v, want 6 lines in batches of 2 at most", st)
	}
	if most.Load() > 2 {
		t.Errorf("%d lines were in batches at once, more than the 250-token cap allows (2)", most.Load())
	}
}

// TestModelJournalAnswersAgain: a request answered by a batch is answered
// from the journal by the next Model on it, as a resumed agent asks the
// turn whose answer its killed run never checkpointed.
func TestModelJournalAnswersAgain(t *testing.T) {
	s := startSim(t, 50*time.Millisecond, simhttp.Config{})
	journal := filepath.Join(t.TempDir(), "j.db")
	p := provider(t, s.url)
	m := newModel(t, p, exactly(journal, 2))
	first := ask(t, t.Context(), m, question(1), question(2))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newModel(t, p, quick(journal))
	again := ask(t, t.Context(), m2, question(1), question(2))
	if again[0] != first[0] || again[1] != first[1] {
		t.Errorf("answers %q, want the journal's %q", again, first)
	}
	if st := s.BatchStats(); st.Batches != 1 {
		t.Errorf("endpoint received %d batches, want 1: the answers were in the journal", st.Batches)
	}
	if st := m2.Stats(); st.Journaled != 2 || st.Submissions != 0 {
		t.Errorf("second Model's Stats = %+v, want 2 journaled, no submission", st)
	}
}

// TestModelResumesRunningBatch: a Model closed while its batch runs (a
// killed run) leaves it in the journal; the next Model polls it and
// answers its calls from it, submitting nothing again.
func TestModelResumesRunningBatch(t *testing.T) {
	s := startSim(t, time.Second, simhttp.Config{})
	journal := filepath.Join(t.TempDir(), "j.db")
	p := provider(t, s.url)
	m := newModel(t, p, exactly(journal, 3))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := m.Generate(ctx, question(i))
			errc <- err
		}()
	}
	waitFor(t, func() bool { return s.BatchStats().Batches == 1 })
	cancel()
	for range 3 {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Generate after cancel = %v, want context.Canceled", err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newModel(t, p, quick(journal))
	ask(t, t.Context(), m2, question(0), question(1), question(2))
	if st := s.BatchStats(); st.Batches != 1 || st.Lines != 3 || st.DuplicateSubmissions != 0 {
		t.Errorf("endpoint received %+v, want the one batch of 3 lines", st)
	}
	if st := m2.Stats(); st.Resumed != 1 || st.Submissions != 0 {
		t.Errorf("second Model's Stats = %+v, want 1 batch resumed and none submitted", st)
	}
}

// proxy serves base's API, letting hook answer a request first (true:
// answered).
func proxy(t *testing.T, base string, hook func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter, *http.Request)) bool) string {
	t.Helper()
	u, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(u)
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hook(w, r, rp.ServeHTTP) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)
	return ps.URL
}

// TestModelLostCreateAnswer: the batch was created but its answer lost
// (a 502 from a proxy): the Model finds the batch by its tag instead of
// creating, and paying for, a second one.
func TestModelLostCreateAnswer(t *testing.T) {
	s := startSim(t, 50*time.Millisecond, simhttp.Config{})
	var lost atomic.Bool
	base := proxy(t, s.url, func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter, *http.Request)) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/batches" || !lost.CompareAndSwap(false, true) {
			return false
		}
		forward(httptest.NewRecorder(), r) // created; the answer is dropped
		http.Error(w, `{"error":{"message":"bad gateway","type":"server_error"}}`, http.StatusBadGateway)
		return true
	})
	m := newModel(t, provider(t, base), exactly(filepath.Join(t.TempDir(), "j.db"), 2))
	ask(t, t.Context(), m, question(1), question(2))
	if st := s.BatchStats(); st.Batches != 1 || st.DuplicateSubmissions != 0 {
		t.Errorf("endpoint received %+v, want the one batch created, found again", st)
	}
}

// TestModelKilledWhileCreating: a process stopped after its Create
// reached the API but before it recorded the batch: the next Model finds
// the batch and answers from it.
func TestModelKilledWhileCreating(t *testing.T) {
	s := startSim(t, 50*time.Millisecond, simhttp.Config{})
	journal := filepath.Join(t.TempDir(), "j.db")
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	created := make(chan struct{}, 1)
	base := proxy(t, s.url, func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter, *http.Request)) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/batches" {
			return false
		}
		forward(httptest.NewRecorder(), r)
		created <- struct{}{}
		select { // the answer never comes
		case <-hang:
		case <-r.Context().Done():
		}
		return true
	})
	m, err := batchmode.New(provider(t, base), quick(journal))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, question(7))
		errc <- err
	}()
	<-created
	cancel()
	<-errc
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newModel(t, provider(t, s.url), quick(journal))
	ask(t, t.Context(), m2, question(7))
	if st := s.BatchStats(); st.Batches != 1 || st.DuplicateSubmissions != 0 {
		t.Errorf("endpoint received %+v, want the one batch, found again by the next Model", st)
	}
	if st := m2.Stats(); st.Resumed != 1 || st.Submissions != 0 {
		t.Errorf("second Model's Stats = %+v, want the batch resumed", st)
	}
}

// TestModelCancelledBatchAskedAgain: a batch cancelled at the provider
// before its lines ran: the Model asks them again in a new submission,
// each under a new custom_id.
func TestModelCancelledBatchAskedAgain(t *testing.T) {
	// One sequence at a time, 100 ms a token: the lines are slow to run.
	s := startSim(t, 0, simhttp.Config{MaxSeqs: 1, MaxQueue: 1, DecodeStep: 100 * time.Millisecond})
	var cancelled atomic.Bool
	base := proxy(t, s.url, func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter, *http.Request)) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/batches" || !cancelled.CompareAndSwap(false, true) {
			return false
		}
		rec := httptest.NewRecorder()
		forward(rec, r)
		var id string
		if _, after, ok := strings.Cut(rec.Body.String(), `"id":"`); ok {
			id, _, _ = strings.Cut(after, `"`)
		}
		resp, err := http.Post(s.url+"/v1/batches/"+id+"/cancel", "application/json", nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("cancel %s: %v %v", id, err, resp)
		} else {
			resp.Body.Close()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = io.Copy(w, bytes.NewReader(rec.Body.Bytes()))
		return true
	})
	m := newModel(t, provider(t, base), quick(filepath.Join(t.TempDir(), "j.db")))
	var reqs []*llm.Request
	for i := range 4 {
		reqs = append(reqs, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("slow %d", i)}}, MaxTokens: 4})
	}
	ask(t, t.Context(), m, reqs...)
	st := m.Stats()
	if st.Requeued == 0 || st.Submissions < 2 {
		t.Errorf("Stats = %+v, want lines asked again in a second submission", st)
	}
	if ss := s.BatchStats(); ss.DuplicateSubmissions != 0 {
		t.Errorf("endpoint received %+v: a custom_id submitted twice", ss)
	}
}

func TestModelCloseEndsWaiting(t *testing.T) {
	s := startSim(t, time.Hour, simhttp.Config{})
	m, err := batchmode.New(provider(t, s.url), quick(filepath.Join(t.TempDir(), "j.db")))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Generate(t.Context(), question(1))
		errc <- err
	}()
	waitFor(t, func() bool { return s.BatchStats().Batches == 1 })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, batchmode.ErrClosed) {
		t.Errorf("Generate = %v, want ErrClosed", err)
	}
	if _, err := m.Generate(t.Context(), question(2)); !errors.Is(err, batchmode.ErrClosed) {
		t.Errorf("Generate after Close = %v, want ErrClosed", err)
	}
}

func TestModelRefusesAnotherFile(t *testing.T) {
	s := startSim(t, 0, simhttp.Config{})
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := batchmode.New(provider(t, s.url), quick(path))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("New on a text file = %v, want an error naming it", err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}

// TestModelUnreachableFailsFast: nothing listens where the provider is:
// the call fails with a connection error at once (the engine's outage
// handling takes over), not after retries that never end.
func TestModelUnreachableFailsFast(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	base := ln.URL
	ln.Close() // nothing listens there now
	m := newModel(t, provider(t, base), quick(filepath.Join(t.TempDir(), "j.db")))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := m.Generate(ctx, question(1))
	if !errors.Is(err, llm.ErrConnection) {
		t.Fatalf("Generate = %v, want a connection error", err)
	}
	if st := m.Stats(); st.Submissions != 0 {
		t.Errorf("Stats = %+v, want no submission", st)
	}
}
