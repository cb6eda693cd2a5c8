package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// newBatch returns a Batch provider against the fake.
func newBatch(t *testing.T, f *fakeBatchAPI) *openai.Batch {
	t.Helper()
	b, err := openai.NewBatch(openai.Config{BaseURL: f.srv.URL + "/v1", APIKey: llm.Secret(f.key), Flavor: openai.FlavorOpenAI, Mode: openai.ModeBatch})
	if err != nil {
		t.Fatalf("NewBatch: %v", err)
	}
	return b
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}, MaxTokens: 64}
}

// submit encodes a line per id, uploads them and creates their batch.
func submit(t *testing.T, b *openai.Batch, ids ...string) (fileID, batchID string) {
	t.Helper()
	ctx := t.Context()
	var lines [][]byte
	for _, id := range ids {
		l, err := b.Encode(id, userRequest("question "+id))
		if err != nil {
			t.Fatalf("Encode(%s): %v", id, err)
		}
		lines = append(lines, l)
	}
	fileID, err := b.Upload(ctx, "sub-1.jsonl", lines)
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	batchID, err = b.Create(ctx, fileID, lines, "tag-"+fileID)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return fileID, batchID
}

// pollUntilDone polls until the batch leaves Running, recording the states.
func pollUntilDone(t *testing.T, b *openai.Batch, id string) batchmode.Status {
	t.Helper()
	for range 20 {
		st, err := b.Poll(t.Context(), id)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		if st.State != batchmode.Running {
			return st
		}
	}
	t.Fatal("batch still running after 20 polls")
	return batchmode.Status{}
}

func results(t *testing.T, b *openai.Batch, id string, st batchmode.Status) map[string]batchmode.Result {
	t.Helper()
	got := map[string]batchmode.Result{}
	err := b.Results(t.Context(), id, st, func(r batchmode.Result) error {
		if _, dup := got[r.ID]; dup {
			t.Errorf("result for %q twice", r.ID)
		}
		got[r.ID] = r
		return nil
	})
	if err != nil {
		t.Fatalf("Results: %v", err)
	}
	return got
}

func TestBatchEncodeIsTheRealTimeBody(t *testing.T) {
	t.Parallel()
	b, err := openai.NewBatch(openai.Config{Flavor: openai.FlavorOpenAI})
	if err != nil {
		t.Fatal(err)
	}
	line, err := b.Encode(`a"1`, userRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		CustomID string         `json:"custom_id"`
		Method   string         `json:"method"`
		URL      string         `json:"url"`
		Body     map[string]any `json:"body"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		t.Fatalf("line %s: %v", line, err)
	}
	if l.CustomID != `a"1` || l.Method != "POST" || l.URL != "/v1/chat/completions" {
		t.Errorf("line = %s", line)
	}
	if l.Body["model"] != "gpt-4.1-mini" || l.Body["max_completion_tokens"] != 64.0 {
		t.Errorf("body = %v, want the model and max_completion_tokens of the openai flavor", l.Body)
	}
	if _, ok := l.Body["stream"]; ok {
		t.Errorf("body has stream: %v", l.Body)
	}
	if strings.Contains(string(line), "\n") {
		t.Errorf("line holds a newline: %q", line)
	}
	if _, err := b.Encode("x", &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "no model"}}}); !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("Encode without a model = %v, want ErrBadRequest", err)
	}
}

func TestBatchCompletes(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	f.outcome = func(id string) string {
		if id == "t" {
			return "tool"
		}
		return "ok"
	}
	b := newBatch(t, f)
	ids := []string{"a", "b", "t"}
	_, batchID := submit(t, b, ids...)
	var seen []batchmode.State
	var st batchmode.Status
	for range 10 {
		var err error
		st, err = b.Poll(t.Context(), batchID)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, st.State)
		if st.State != batchmode.Running {
			break
		}
	}
	// validating → in_progress → finalizing are Running; completed Ended.
	if want := []batchmode.State{batchmode.Running, batchmode.Running, batchmode.Running, batchmode.Ended}; !slices.Equal(seen, want) {
		t.Fatalf("states = %v, want %v", seen, want)
	}
	if st.Expired || st.Cancelled || st.OutputFile == "" || st.ErrorFile != "" || st.Done != 3 || st.Total != 3 {
		t.Fatalf("status = %+v", st)
	}
	got := results(t, b, batchID, st)
	if k := slices.Sorted(maps.Keys(got)); !slices.Equal(k, []string{"a", "b", "t"}) {
		t.Fatalf("result ids = %v", k)
	}
	a := got["a"]
	if a.Err != nil || a.Resp.Message.Content != "answer to a" || a.Resp.FinishReason != llm.FinishStop {
		t.Errorf("a = %+v", a)
	}
	if u := a.Resp.Usage; u.PromptTokens != 22 || u.CompletionTokens != 5 || u.CachedTokens != 16 {
		t.Errorf("a usage = %+v", u)
	}
	tc := got["t"].Resp
	if tc == nil || tc.FinishReason != llm.FinishToolCalls || len(tc.Message.ToolCalls) != 1 || tc.Message.ToolCalls[0].Name != "lookup" || string(tc.Message.ToolCalls[0].Arguments) != `{"q":"x"}` {
		t.Errorf("t = %+v", got["t"])
	}
}

func TestBatchPartialFailures(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	outcomes := map[string]string{"ok": "ok", "bad": "400", "server": "500", "ctx": "context", "garbage": "garbage"}
	f.outcome = func(id string) string { return outcomes[id] }
	b := newBatch(t, f)
	_, batchID := submit(t, b, slices.Sorted(maps.Keys(outcomes))...)
	st := pollUntilDone(t, b, batchID)
	if st.State != batchmode.Ended || st.OutputFile == "" || st.ErrorFile == "" {
		t.Fatalf("status = %+v", st)
	}
	got := results(t, b, batchID, st)
	if got["ok"].Err != nil || got["ok"].Resp == nil {
		t.Errorf("ok = %+v", got["ok"])
	}
	for id, class := range map[string]error{"bad": llm.ErrBadRequest, "server": llm.ErrServer, "ctx": llm.ErrContextLength, "garbage": llm.ErrServer} {
		r := got[id]
		if r.Resp != nil || !errors.Is(r.Err, class) {
			t.Errorf("%s = %+v, want an error of class %v", id, r, class)
		}
	}
	var ae *llm.APIError
	if !errors.As(got["bad"].Err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, "line failed with 400") || !strings.Contains(ae.Message, "req_") {
		t.Errorf("bad's error = %#v", got["bad"].Err)
	}
	if msg := got["garbage"].Err.Error(); !strings.Contains(msg, "line 2") /* bad, garbage: ctx is in the error file */ || !strings.Contains(msg, st.OutputFile) {
		t.Errorf("garbage's error = %q, want it to name the file and line", msg)
	}
	if llm.IsTransient(got["bad"].Err) || !llm.IsTransient(got["server"].Err) {
		t.Errorf("IsTransient: 400 %v, 500 %v", llm.IsTransient(got["bad"].Err), llm.IsTransient(got["server"].Err))
	}
}

func TestBatchExpired(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	f.outcome = func(id string) string {
		if id == "late" {
			return "unanswered"
		}
		return "ok"
	}
	b := newBatch(t, f)
	_, batchID := submit(t, b, "early", "late")
	st := pollUntilDone(t, b, batchID)
	if st.State != batchmode.Ended || !st.Expired || st.Cancelled {
		t.Fatalf("status = %+v, want Ended and Expired", st)
	}
	got := results(t, b, batchID, st)
	if got["early"].Resp == nil {
		t.Errorf("early = %+v", got["early"])
	}
	if r := got["late"]; r.Resp != nil || !errors.Is(r.Err, batchmode.ErrUnanswered) {
		t.Errorf("late = %+v, want ErrUnanswered", r)
	}
}

func TestBatchCancelled(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	b := newBatch(t, f)
	_, batchID := submit(t, b, "x", "y")
	if _, err := b.Poll(t.Context(), batchID); err != nil {
		t.Fatal(err)
	}
	if err := b.Cancel(t.Context(), batchID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	st := pollUntilDone(t, b, batchID)
	if st.State != batchmode.Ended || !st.Cancelled {
		t.Fatalf("status = %+v, want Ended and Cancelled", st)
	}
	got := results(t, b, batchID, st)
	for _, id := range []string{"x", "y"} {
		if !errors.Is(got[id].Err, batchmode.ErrUnanswered) {
			t.Errorf("%s = %+v, want ErrUnanswered", id, got[id])
		}
	}
	if err := b.Cancel(t.Context(), "batch_none"); !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("Cancel of an unknown batch = %v, want ErrBadRequest (404)", err)
	}
}

func TestBatchFailed(t *testing.T) {
	t.Parallel()
	t.Run("validation", func(t *testing.T) {
		t.Parallel()
		f := newFakeBatchAPI(t)
		b := newBatch(t, f)
		ctx := t.Context()
		good, _ := b.Encode("a", userRequest("q"))
		fileID, err := b.Upload(ctx, "bad.jsonl", [][]byte{good, []byte(`{"custom_id":"b","method":"GET","url":"/v1/chat/completions","body":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		batchID, err := b.Create(ctx, fileID, nil, "tag")
		if err != nil {
			t.Fatal(err)
		}
		st := pollUntilDone(t, b, batchID)
		if st.State != batchmode.Failed || st.Retry || st.Reason != "line 2: invalid line" {
			t.Errorf("status = %+v, want Failed, line 2", st)
		}
	})
	t.Run("token limit", func(t *testing.T) {
		t.Parallel()
		f := newFakeBatchAPI(t)
		f.failWith = "token_limit_exceeded"
		b := newBatch(t, f)
		_, batchID := submit(t, b, "a")
		st := pollUntilDone(t, b, batchID)
		if st.State != batchmode.Failed || !st.Retry || !strings.Contains(st.Reason, "Enqueued token limit") {
			t.Errorf("status = %+v, want Failed with Retry", st)
		}
	})
}

func TestBatchFindAfterLostCreate(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	f.pageMax = 2
	b := newBatch(t, f)
	ctx := t.Context()
	since := time.Now().Add(-time.Second)
	line, _ := b.Encode("a", userRequest("q"))
	fileID, err := b.Upload(ctx, "s.jsonl", [][]byte{line})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.loseCreate = true
	f.mu.Unlock()
	if _, err := b.Create(ctx, fileID, nil, "the-tag"); !errors.Is(err, llm.ErrServer) {
		t.Fatalf("Create with a lost answer = %v, want ErrServer", err)
	}
	// Newer batches of other files and tags, so that Find pages back.
	for i := range 5 {
		submit(t, b, fmt.Sprint("other", i))
	}
	found, err := b.Find(ctx, fileID, "the-tag", 1, since)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	want := f.order[0]
	f.mu.Unlock()
	if found != want {
		t.Errorf("Find = %q, want %q", found, want)
	}
	if id, err := b.Find(ctx, fileID, "another-tag", 1, since); err != nil || id != "" {
		t.Errorf("Find with another tag = %q, %v; want none", id, err)
	}
	if id, err := b.Find(ctx, fileID, "the-tag", 1, time.Now().Add(time.Hour)); err != nil || id != "" {
		t.Errorf("Find since later = %q, %v; want none", id, err)
	}
}

func TestBatchDelete(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	b := newBatch(t, f)
	fileID, batchID := submit(t, b, "a")
	st := pollUntilDone(t, b, batchID)
	if err := b.Delete(t.Context(), fileID, st.OutputFile, st.ErrorFile); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if f.hasFile(fileID) || f.hasFile(st.OutputFile) || f.fileCount() != 0 {
		t.Errorf("files left: %d", f.fileCount())
	}
	if err := b.Delete(t.Context(), fileID); err != nil {
		t.Errorf("Delete of a deleted file = %v, want nil", err)
	}
}

func TestBatchHTTPErrors(t *testing.T) {
	t.Parallel()
	f := newFakeBatchAPI(t)
	b := newBatch(t, f)
	f.mu.Lock()
	f.rateLimited = true
	f.mu.Unlock()
	_, err := b.Upload(t.Context(), "x.jsonl", [][]byte{[]byte(`{}`)})
	var ae *llm.APIError
	if !errors.As(err, &ae) || !errors.Is(err, llm.ErrRateLimited) || ae.RetryAfter != 3*time.Second || ae.RateLimit == nil || ae.RateLimit.LimitRequests != 500 {
		t.Errorf("429 = %#v, want ErrRateLimited with Retry-After and rate limits", err)
	}
	bad, err := openai.NewBatch(openai.Config{BaseURL: f.srv.URL + "/v1", APIKey: "sk-wrong-secret-key", Flavor: openai.FlavorOpenAI})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Poll(t.Context(), "batch_1")
	if !errors.Is(err, llm.ErrAuth) || strings.Contains(err.Error(), "sk-wrong-secret-key") {
		t.Errorf("bad key = %v, want ErrAuth without the key", err)
	}
	if s := fmt.Sprintf("%v %#v", bad, bad); strings.Contains(s, "sk-wrong") {
		t.Errorf("printing the provider shows the key: %s", s)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Poll(ctx, "batch_1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with a cancelled context = %v", err)
	}
}

func TestNewBatchRefuses(t *testing.T) {
	t.Parallel()
	for _, cfg := range []openai.Config{
		{Flavor: openai.FlavorVLLM},
		{Flavor: openai.FlavorOllama},
		{Flavor: openai.FlavorOpenAI, Mode: "bulk"},
		{Flavor: openai.FlavorOpenAI, Window: 90 * time.Minute},
		{Flavor: openai.FlavorOpenAI, Window: -time.Hour},
	} {
		if _, err := openai.NewBatch(cfg); err == nil {
			t.Errorf("NewBatch(%+v) = nil error", cfg)
		}
	}
	b, err := openai.NewBatch(openai.Config{Flavor: openai.FlavorOpenAI})
	if err != nil {
		t.Fatal(err)
	}
	if l := b.Limits(); l.MaxLines != 50_000 || l.MaxBytes != 200<<20 || l.Window != 24*time.Hour {
		t.Errorf("Limits = %+v", l)
	}
}
