package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/llm"
)

// This file runs batchmode.Model over anthropic.Batch against the Message
// Batches server of batch_server_test.go: the provider as the Model
// drives it, with custom_ids the Model chooses.

// newBatchModel returns a Model over a Batch against s, journaling to
// journal ("" in memory), quick to submit and to poll; closed at cleanup.
func newBatchModel(t *testing.T, s *batchServer, journal string) *batchmode.Model {
	t.Helper()
	m, err := batchmode.New(newBatch(t, s), batchmode.Config{Journal: journal, Linger: 100 * time.Millisecond, PollEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("batchmode.New = %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// outputMessage is a message answering through the output tool with input.
func outputMessage(input string) string {
	return `{"id":"msg_o","type":"message","role":"assistant","model":"claude-x","content":[` + toolUse("toolu_1", "output", input) + `],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":4}}`
}

// textMessage is a message answering text.
func textMessage(text string) string {
	return `{"id":"msg_t","type":"message","role":"assistant","model":"claude-x","content":[` + textBlock(text) + `],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}`
}

// generateAll calls m.Generate with each request at once and returns the
// answers and errors in order.
func generateAll(ctx context.Context, m *batchmode.Model, reqs ...*llm.Request) ([]*llm.Response, []error) {
	resps, errs := make([]*llm.Response, len(reqs)), make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { resps[i], errs[i] = m.Generate(ctx, req) })
	}
	wg.Wait()
	return resps, errs
}

// creates returns the number of batches s created and the requests of each.
func (s *batchServer) creates() (int, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sizes []int
	for _, b := range s.batches {
		sizes = append(sizes, len(b.requests))
	}
	return len(s.batches), sizes
}

// TestBatchModelOneSubmission: concurrent calls, one asking for structured
// output through the output tool, go out in one batch and each gets its
// own answer, decoded as a real-time call's would be.
func TestBatchModelOneSubmission(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.decide = func(b *fakeBatch, q fakeRequest) (string, string) {
		switch {
		case bytes.Contains(q.Params, []byte(`"name":"output"`)):
			return "succeeded", outputMessage(`{"n":7}`)
		case bytes.Contains(q.Params, []byte("question ")):
			i := bytes.Index(q.Params, []byte("question "))
			return "succeeded", textMessage("answer to " + string(q.Params[i:i+len("question 0")]))
		}
		return "", ""
	}
	m := newBatchModel(t, s, "")
	structured := userRequest("give n")
	structured.Output = &llm.OutputSpec{Schema: json.RawMessage(answerSchema)}
	resps, errs := generateAll(t.Context(), m, userRequest("question 0"), userRequest("question 1"), userRequest("question 2"), structured)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i := range 3 {
		if got, want := resps[i].Message.Content, "answer to question "+string(rune('0'+i)); got != want {
			t.Errorf("call %d answered %q, want %q", i, got, want)
		}
		if resps[i].Usage.PromptTokens != 10 || resps[i].Usage.CompletionTokens != 3 {
			t.Errorf("call %d usage %+v, want 10 prompt and 3 completion tokens", i, resps[i].Usage)
		}
	}
	if got := resps[3].Message.Content; got != `{"n":7}` || len(resps[3].Message.ToolCalls) != 0 {
		t.Errorf("structured call answered %q with tool calls %v, want the output tool's input {\"n\":7} and no tool call", got, resps[3].Message.ToolCalls)
	}
	if n, sizes := s.creates(); n != 1 || sizes[0] != 4 {
		t.Errorf("server created %d batches of %v requests, want one of 4", n, sizes)
	}
	if st := m.Stats(); st.Submissions != 1 || st.Lines != 4 || st.Requeued != 0 || st.Failed != 0 {
		t.Errorf("stats %+v, want 1 submission of 4 lines, none requeued or failed", st)
	}
}

// TestBatchModelAsksExpiredAgain: a line the first batch leaves expired,
// and one of a cancelled batch, are asked again in the next submission
// under a new custom_id and answered; an errored line fails its call
// alone.
func TestBatchModelAsksExpiredAgain(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.decide = func(b *fakeBatch, q fakeRequest) (string, string) {
		switch {
		case b.id == "msgbatch_1" && bytes.Contains(q.Params, []byte("expires once")):
			return "expired", ""
		case bytes.Contains(q.Params, []byte("always bad")):
			return "errored", ""
		}
		return "succeeded", textMessage("ok " + b.id)
	}
	m := newBatchModel(t, s, "")
	resps, errs := generateAll(t.Context(), m, userRequest("expires once"), userRequest("answered"), userRequest("always bad"))
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v, want the expired line answered on its second try", errs)
	}
	if got := resps[0].Message.Content; got != "ok msgbatch_2" {
		t.Errorf("expired line answered %q, want the second batch's answer", got)
	}
	if got := resps[1].Message.Content; got != "ok msgbatch_1" {
		t.Errorf("answered line %q, want the first batch's answer", got)
	}
	var apiErr *llm.APIError
	if !errors.As(errs[2], &apiErr) || !errors.Is(errs[2], llm.ErrBadRequest) {
		t.Errorf("errored line: %v, want an *llm.APIError of class ErrBadRequest", errs[2])
	}
	n, sizes := s.creates()
	if n != 2 || sizes[0] != 3 || sizes[1] != 1 {
		t.Fatalf("server created %d batches of %v requests, want 3 then the expired one alone", n, sizes)
	}
	s.mu.Lock()
	first, again := s.batches[0].requests, s.batches[1].requests[0]
	s.mu.Unlock()
	for _, q := range first {
		if q.CustomID == again.CustomID {
			t.Errorf("the line asked again kept its custom_id %q", q.CustomID)
		}
	}
	if st := m.Stats(); st.Submissions != 2 || st.Requeued != 1 || st.Failed != 1 {
		t.Errorf("stats %+v, want 2 submissions, 1 line requeued, 1 failed", st)
	}
}

// TestBatchModelAsksCancelledAgain: the lines of a batch cancelled at the
// provider (by someone else: the console) are asked again and answered.
func TestBatchModelAsksCancelledAgain(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.mu.Lock()
	s.endAfter = 1_000_000 // runs until cancelled below
	s.mu.Unlock()
	s.decide = func(b *fakeBatch, q fakeRequest) (string, string) { return "succeeded", textMessage("ok " + b.id) }
	m := newBatchModel(t, s, "")
	done := make(chan struct{})
	var resps []*llm.Response
	var errs []error
	go func() {
		defer close(done)
		resps, errs = generateAll(t.Context(), m, userRequest("a"), userRequest("b"))
	}()
	waitFor(t, func() bool { n, _ := s.creates(); return n == 1 })
	s.mu.Lock()
	s.batches[0].cancelled, s.batches[0].polls = true, 0
	s.endAfter = 2
	s.mu.Unlock()
	<-done
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := resps[i].Message.Content; got != "ok msgbatch_2" {
			t.Errorf("call %d answered %q, want the second batch's answer", i, got)
		}
	}
	if st := m.Stats(); st.Submissions != 2 || st.Requeued != 2 {
		t.Errorf("stats %+v, want 2 submissions, 2 lines requeued", st)
	}
}

// TestBatchModelResumesFromJournal: a Model closed while its batch runs
// leaves the batch in its journal; a new Model on the same journal,
// asked the same requests, answers them from that batch without creating
// another. The first Model closes as soon as the server has the batch:
// with Create's answer read and journaled, or not yet read (then the
// second Model finds the batch by listing).
func TestBatchModelResumesFromJournal(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.mu.Lock()
	s.endAfter = 1_000_000 // runs until the second Model polls it
	s.mu.Unlock()
	s.decide = func(b *fakeBatch, q fakeRequest) (string, string) {
		i := bytes.Index(q.Params, []byte("item "))
		return "succeeded", textMessage("answer " + string(q.Params[i:i+len("item 0")]))
	}
	journal := filepath.Join(t.TempDir(), "batches.db")
	reqs := []*llm.Request{userRequest("item 0"), userRequest("item 1"), userRequest("item 2")}

	first, err := batchmode.New(newBatch(t, s), batchmode.Config{Journal: journal, Linger: 50 * time.Millisecond, PollEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []error, 1)
	go func() {
		_, errs := generateAll(context.Background(), first, reqs...)
		done <- errs
	}()
	waitFor(t, func() bool { n, _ := s.creates(); return n == 1 })
	if err := first.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	for i, err := range <-done {
		if !errors.Is(err, batchmode.ErrClosed) {
			t.Errorf("call %d of the closed Model: %v, want ErrClosed", i, err)
		}
	}

	s.mu.Lock()
	s.endAfter = 3
	s.mu.Unlock()
	second := newBatchModel(t, s, journal)
	resps, errs := generateAll(t.Context(), second, reqs...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d of the second Model: %v", i, err)
		}
		if got, want := resps[i].Message.Content, "answer item "+string(rune('0'+i)); got != want {
			t.Errorf("call %d answered %q, want %q", i, got, want)
		}
	}
	if n, sizes := s.creates(); n != 1 {
		t.Errorf("server created %d batches (%v requests), want the first alone", n, sizes)
	}
	if st := second.Stats(); st.Resumed != 1 || st.Submissions != 0 {
		t.Errorf("second Model's stats %+v, want 1 batch resumed, 0 submitted", st)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
