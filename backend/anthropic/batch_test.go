package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/llm"
)

// newBatch returns a Batch against s, failing the test on an error.
func newBatch(t *testing.T, s *batchServer) *anthropic.Batch {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	b, err := anthropic.NewBatch(anthropic.Config{BaseURL: s.srv.URL, APIKey: llm.Secret(s.key),
		Model: "claude-x", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatalf("NewBatch = %v", err)
	}
	return b
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: text}}}
}

// encode encodes one line per id, each asking userRequest(id).
func encode(t *testing.T, b *anthropic.Batch, ids ...string) [][]byte {
	t.Helper()
	var lines [][]byte
	for _, id := range ids {
		line, err := b.Encode(id, userRequest(id))
		if err != nil {
			t.Fatalf("Encode(%q) = %v", id, err)
		}
		lines = append(lines, line)
	}
	return lines
}

// pollUntilEnded polls id until it ends, returning every status seen.
func pollUntilEnded(t *testing.T, b *anthropic.Batch, id string) []batchmode.Status {
	t.Helper()
	var seen []batchmode.Status
	for range 10 {
		st, err := b.Poll(t.Context(), id)
		if err != nil {
			t.Fatalf("Poll(%s) = %v", id, err)
		}
		seen = append(seen, st)
		if st.State == batchmode.Ended {
			return seen
		}
	}
	t.Fatalf("Poll(%s): not ended after 10 polls: %+v", id, seen)
	return nil
}

// results collects the results of an ended batch by custom_id.
func results(t *testing.T, b *anthropic.Batch, id string, st batchmode.Status) map[string]batchmode.Result {
	t.Helper()
	got := map[string]batchmode.Result{}
	err := b.Results(t.Context(), id, st, func(r batchmode.Result) error {
		if _, dup := got[r.ID]; dup {
			t.Errorf("Results(%s): %q twice", id, r.ID)
		}
		got[r.ID] = r
		return nil
	})
	if err != nil {
		t.Fatalf("Results(%s) = %v", id, err)
	}
	return got
}

func TestBatchRoundTrip(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	b := newBatch(t, s)
	if up, err := b.Upload(t.Context(), "x.jsonl", nil); up != "" || err != nil {
		t.Errorf("Upload = %q, %v; want \"\", nil", up, err)
	}
	ids := []string{"ok-1", "ok_2", "bad-3", "ovl-4", "exp-5"}
	id, err := b.Create(t.Context(), "", encode(t, b, ids...), "tag")
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	seen := pollUntilEnded(t, b, id)
	wantRunning := batchmode.Status{State: batchmode.Running, Total: 5}
	if len(seen) != 3 || seen[0] != wantRunning || seen[1] != wantRunning {
		t.Errorf("Poll statuses = %+v, want 2 × %+v then ended", seen, wantRunning)
	}
	end := seen[len(seen)-1]
	if want := (batchmode.Status{State: batchmode.Ended, Expired: true, Done: 5, Total: 5}); end != want {
		t.Errorf("ended status = %+v, want %+v", end, want)
	}
	got := results(t, b, id, end)
	if len(got) != len(ids) {
		t.Fatalf("Results = %d lines, want %d: %v", len(got), len(ids), got)
	}
	for _, ok := range []string{"ok-1", "ok_2"} {
		r := got[ok]
		want := &llm.Response{
			Message:      llm.Message{Role: llm.RoleAssistant, Content: "answer " + ok},
			Usage:        llm.Usage{PromptTokens: 17, CompletionTokens: 3, CachedTokens: 5, CacheWriteTokens: 2},
			FinishReason: llm.FinishStop,
		}
		if r.Err != nil {
			t.Errorf("result %s: Err = %v", ok, r.Err)
		}
		if diff := cmp.Diff(want, r.Resp); diff != "" {
			t.Errorf("result %s (-want +got):\n%s", ok, diff)
		}
	}
	for id, class := range map[string]error{"bad-3": llm.ErrBadRequest, "ovl-4": llm.ErrOverloaded, "exp-5": batchmode.ErrUnanswered} {
		r := got[id]
		if r.Resp != nil || !errors.Is(r.Err, class) {
			t.Errorf("result %s = %+v, %v; want no answer and an error of class %v", id, r.Resp, r.Err, class)
		}
		if _, ok := errors.AsType[*llm.APIError](r.Err); !ok {
			t.Errorf("result %s: Err = %T, want *llm.APIError", id, r.Err)
		}
	}
	if !strings.Contains(got["bad-3"].Err.Error(), "request bad-3 failed") {
		t.Errorf("result bad-3: Err = %v, want the API's message", got["bad-3"].Err)
	}
	if err := b.Delete(t.Context(), "", ""); err != nil {
		t.Errorf("Delete = %v, want nil (no files)", err)
	}
}

// TestBatchEncodeIsGenerateBody checks that a line's params are the body
// Generate sends for the same request, and that a structured answer and a
// tool call come back as Generate reads them.
func TestBatchEncodeIsGenerateBody(t *testing.T) {
	t.Parallel()
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "hi"}},
		Tools:    []llm.ToolDef{{Name: "lookup", Description: "look up", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}},
		Output:   &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"array","items":{"type":"integer"}}`)},
	}
	var sent []byte
	m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", Model: "claude-x",
		HTTPClient: canned(200, jsonHeader, []byte(`{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"x"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`), &sent)})
	if _, err := m.Generate(t.Context(), req); err != nil {
		t.Fatalf("Generate = %v", err)
	}

	s := newBatchServer(t)
	b := newBatch(t, s)
	line, err := b.Encode("ok-out", req)
	if err != nil {
		t.Fatalf("Encode = %v", err)
	}
	var got struct {
		CustomID string          `json:"custom_id"`
		Params   json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("Encode = %s: %v", line, err)
	}
	if got.CustomID != "ok-out" {
		t.Errorf("Encode custom_id = %q, want ok-out", got.CustomID)
	}
	if diff := jsonDiff(t, sent, got.Params); diff != "" {
		t.Errorf("Encode params differ from Generate's body (-generate +encode):\n%s", diff)
	}
	callLine, err := b.Encode("ok-call", req)
	if err != nil {
		t.Fatalf("Encode = %v", err)
	}

	s.answer["ok-out"] = `{"id":"m1","type":"message","role":"assistant","content":[{"type":"text","text":"dropped"},{"type":"tool_use","id":"t1","name":"answer","input":{"value":[1,2]}}],` +
		`"stop_reason":"tool_use","usage":{"input_tokens":4,"output_tokens":2}}`
	s.answer["ok-call"] = `{"id":"m2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"lookup","input":{"q":"x"}}],` +
		`"stop_reason":"tool_use","usage":{"input_tokens":4,"output_tokens":2}}`
	id, err := b.Create(t.Context(), "", [][]byte{line, callLine}, "tag")
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	seen := pollUntilEnded(t, b, id)
	res := results(t, b, id, seen[len(seen)-1])
	if r := res["ok-out"]; r.Err != nil || r.Resp.Message.Content != "[1,2]" || r.Resp.FinishReason != llm.FinishStop || len(r.Resp.Message.ToolCalls) != 0 {
		t.Errorf("structured result = %+v, %v; want content [1,2], finish stop, no tool call", r.Resp, r.Err)
	}
	wantCall := []llm.ToolCall{{ID: "t2", Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}}
	if r := res["ok-call"]; r.Err != nil || r.Resp.FinishReason != llm.FinishToolCalls || !cmp.Equal(wantCall, r.Resp.Message.ToolCalls) {
		t.Errorf("tool-call result = %+v, %v; want calls %+v", r.Resp, r.Err, wantCall)
	}
}

func TestBatchEncodeRefuses(t *testing.T) {
	t.Parallel()
	b := newBatch(t, newBatchServer(t))
	for _, id := range []string{"", "has space", "dot.ted", strings.Repeat("a", 65), "ünï"} {
		if line, err := b.Encode(id, userRequest("x")); !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), "custom_id") {
			t.Errorf("Encode(%q) = %s, %v; want an ErrBadRequest naming custom_id", id, line, err)
		}
	}
	if _, err := b.Encode(strings.Repeat("a", 64), userRequest("x")); err != nil {
		t.Errorf("Encode(64 characters) = %v", err)
	}
	audio := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartAudio, MediaType: "audio/wav", Data: []byte("RIFF")}}}}}
	if _, err := b.Encode("a1", audio); !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("Encode(audio) = %v, want ErrBadRequest", err)
	}
}

func TestBatchCancel(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.endAfter = 100
	b := newBatch(t, s)
	id, err := b.Create(t.Context(), "", encode(t, b, "ok-1", "ok-2"), "tag")
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	if err := b.Cancel(t.Context(), id); err != nil {
		t.Fatalf("Cancel = %v", err)
	}
	seen := pollUntilEnded(t, b, id)
	if first := seen[0]; first.State != batchmode.Running || !first.Cancelled {
		t.Errorf("Poll after Cancel = %+v, want Running (canceling) and Cancelled", first)
	}
	end := seen[len(seen)-1]
	if want := (batchmode.Status{State: batchmode.Ended, Cancelled: true, Done: 2, Total: 2}); end != want {
		t.Errorf("ended status = %+v, want %+v", end, want)
	}
	for cid, r := range results(t, b, id, end) {
		if !errors.Is(r.Err, batchmode.ErrUnanswered) || r.Resp != nil {
			t.Errorf("result %s = %+v, %v; want ErrUnanswered", cid, r.Resp, r.Err)
		}
	}
	if err := b.Cancel(t.Context(), "msgbatch_none"); err == nil {
		t.Errorf("Cancel(unknown) = nil, want an error")
	}
}

func TestBatchFind(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.pageSize = 2
	b := newBatch(t, s)
	create := func(n int) string {
		t.Helper()
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("ok-%d", i))
		}
		id, err := b.Create(t.Context(), "", encode(t, b, ids...), "tag")
		if err != nil {
			t.Fatalf("Create = %v", err)
		}
		return id
	}
	old := time.Now().Add(-time.Hour)
	for range 3 {
		create(1) // candidates by time, not by count
	}
	three := create(3)
	for range 4 {
		create(1)
	}
	tests := []struct {
		name  string
		n     int
		since time.Time
		want  string
	}{
		{"one candidate, pages back", 3, old, three},
		{"none of that size", 5, old, ""},
		{"several", 1, old, ""},
		{"none since", 3, time.Now().Add(time.Hour), ""},
	}
	for _, tt := range tests {
		got, err := b.Find(t.Context(), "", "tag", tt.n, tt.since)
		if err != nil || got != tt.want {
			t.Errorf("%s: Find(n=%d) = %q, %v; want %q", tt.name, tt.n, got, err, tt.want)
		}
	}
	s.mu.Lock()
	calls := s.listCalls
	s.mu.Unlock()
	// 8 batches at 2 a page: each full walk is 4 pages; the last test stops
	// at the first page, all of it older than since.
	if calls != 3*4+1 {
		t.Errorf("list requests = %d, want %d", calls, 3*4+1)
	}
}

func TestBatchResultsURLOnAnotherHost(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.endAfter = 0
	b := newBatch(t, s)
	id, err := b.Create(t.Context(), "", encode(t, b, "ok-1"), "tag")
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	st := pollUntilEnded(t, b, id)[0]
	results(t, b, id, st)

	// The same handler behind another host: it must not get the key.
	other := httptest.NewServer(s.srv.Config.Handler)
	t.Cleanup(other.Close)
	s.mu.Lock()
	s.resultsHost = other
	s.mu.Unlock()
	if got := results(t, b, id, st); got["ok-1"].Err != nil {
		t.Errorf("result from the other host = %v", got["ok-1"].Err)
	}
	// And a redirect from the API's host to the other host drops it too.
	s.mu.Lock()
	s.resultsHost = nil
	s.mu.Unlock()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	viaRedirect, err := anthropic.NewBatch(anthropic.Config{BaseURL: s.srv.URL, APIKey: llm.Secret(s.key), HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/results") && r.URL.Host == strings.TrimPrefix(s.srv.URL, "http://") {
			r = r.Clone(r.Context())
			r.URL.Host = strings.TrimPrefix(redirect.URL, "http://")
		}
		return tr.RoundTrip(r)
	})}})
	if err != nil {
		t.Fatalf("NewBatch = %v", err)
	}
	results(t, viaRedirect, id, st)

	s.mu.Lock()
	keys := slices.Clone(s.resultKeys)
	s.mu.Unlock()
	if want := []string{s.key, "", ""}; !slices.Equal(keys, want) {
		t.Errorf("x-api-key of the results requests = %q, want %q", keys, want)
	}
}

func TestBatchCreateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status  int
		typ     string
		class   error
		waitFor time.Duration
	}{
		{429, "rate_limit_error", llm.ErrRateLimited, 7 * time.Second},
		{529, "overloaded_error", llm.ErrOverloaded, 7 * time.Second},
		{500, "api_error", llm.ErrServer, 7 * time.Second},
		{400, "invalid_request_error", llm.ErrBadRequest, 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			t.Parallel()
			s := newBatchServer(t)
			b := newBatch(t, s)
			s.mu.Lock()
			s.failCreate, s.failCreateType = tt.status, tt.typ
			s.mu.Unlock()
			lines := encode(t, b, "ok-1")
			_, err := b.Create(t.Context(), "", lines, "tag")
			ae, ok := errors.AsType[*llm.APIError](err)
			if !ok || !errors.Is(err, tt.class) || ae.StatusCode != tt.status || ae.RetryAfter != tt.waitFor {
				t.Fatalf("Create = %v; want an *llm.APIError of class %v, status %d, retry after %v", err, tt.class, tt.status, tt.waitFor)
			}
			if transient := tt.status != 400; llm.IsTransient(err) != transient {
				t.Errorf("IsTransient(%v) = %v, want %v", err, !transient, transient)
			}
			if id, err := b.Create(t.Context(), "", lines, "tag"); err != nil || id == "" {
				t.Errorf("Create again = %q, %v; want a batch", id, err)
			}
		})
	}
}

func TestBatchErrorsHideKey(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	b, err := anthropic.NewBatch(anthropic.Config{BaseURL: s.srv.URL, APIKey: "sk-ant-wrong-key-123",
		HTTPClient: canned(401, jsonHeader, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-wrong-key-123"}}`), nil)})
	if err != nil {
		t.Fatalf("NewBatch = %v", err)
	}
	_, err = b.Poll(t.Context(), "msgbatch_1")
	if !errors.Is(err, llm.ErrAuth) || strings.Contains(err.Error(), "sk-ant-wrong-key-123") {
		t.Errorf("Poll = %v; want ErrAuth without the key", err)
	}
	if s := fmt.Sprintf("%v %#v %+v", b, b, b); strings.Contains(s, "sk-ant") {
		t.Errorf("printing a Batch shows the key: %s", s)
	}
	if _, err := b.Poll(t.Context(), ""); !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("Poll(\"\") = %v, want ErrBadRequest", err)
	}
}

func TestBatchFilesBeta(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	b := newBatch(t, s)
	doc := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "read", Parts: []llm.Part{{Kind: llm.PartFile, FileID: "file_011abc"}}}}}
	line, err := b.Encode("ok-doc", doc)
	if err != nil {
		t.Fatalf("Encode(document by file id) = %v", err)
	}
	if _, err := b.Create(t.Context(), "", [][]byte{line}, "t"); err != nil {
		t.Fatalf("Create = %v", err)
	}
	if _, err := b.Create(t.Context(), "", encode(t, b, "ok-plain"), "t"); err != nil {
		t.Fatalf("Create = %v", err)
	}
	s.mu.Lock()
	betas := slices.Clone(s.betas)
	s.mu.Unlock()
	if want := []string{"files-api-2025-04-14", ""}; !slices.Equal(betas, want) {
		t.Errorf("anthropic-beta of the creates = %q, want %q", betas, want)
	}
}

// TestBatchMalformedLines checks that a malformed line fails alone.
func TestBatchMalformedLines(t *testing.T) {
	t.Parallel()
	body := strings.Join([]string{
		`{"custom_id":"ok-1","result":{"type":"succeeded","message":{"type":"message","role":"assistant","content":[{"type":"text","text":"fine"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}}}`,
		`not json`,
		`{"result":{"type":"succeeded"}}`,
		`{"custom_id":"ok-2","result":{"type":"succeeded","message":"oops"}}`,
		`{"custom_id":"ok-3","result":{"type":"weird"}}`,
		`{"custom_id":"ok-4","result":{"type":"errored"}}`,
		``,
		`{"custom_id":"ok-5","result":{"type":"expired"}}`,
	}, "\n")
	b := resultsBatch(t, []byte(body))
	var got []batchmode.Result
	err := b.Results(t.Context(), "msgbatch_1", batchmode.Status{State: batchmode.Ended}, func(r batchmode.Result) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Results = %v", err)
	}
	if len(got) != 7 {
		t.Fatalf("Results = %d lines, want 7: %+v", len(got), got)
	}
	if got[0].ID != "ok-1" || got[0].Err != nil || got[0].Resp.Message.Content != "fine" {
		t.Errorf("line 1 = %+v", got[0])
	}
	for i, want := range map[int]string{1: "", 2: "", 3: "ok-2", 4: "ok-3", 5: "ok-4"} {
		r := got[i]
		line := i + 1
		if r.ID != want || !errors.Is(r.Err, llm.ErrServer) || !strings.Contains(r.Err.Error(), fmt.Sprintf("line %d", line)) {
			t.Errorf("result %d = %q, %v; want id %q and an ErrServer naming line %d", i, r.ID, r.Err, want, line)
		}
	}
	if !errors.Is(got[6].Err, batchmode.ErrUnanswered) {
		t.Errorf("line 8 = %v, want ErrUnanswered", got[6].Err)
	}
	stop := errors.New("stop")
	n := 0
	if err := b.Results(t.Context(), "msgbatch_1", batchmode.Status{}, func(batchmode.Result) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Results with a failing yield = %v after %d lines, want stop after 1", err, n)
	}
}

// resultsBatch returns a Batch whose server answers any retrieve with an
// ended batch and its results_url with body, without a network.
func resultsBatch(t testing.TB, body []byte) *anthropic.Batch {
	t.Helper()
	batch := []byte(`{"id":"msgbatch_1","type":"message_batch","processing_status":"ended","request_counts":{"processing":0,"succeeded":1,"errored":0,"canceled":0,"expired":0},` +
		`"created_at":"2026-01-01T00:00:00Z","cancel_initiated_at":null,"results_url":"https://api.anthropic.test/v1/messages/batches/msgbatch_1/results"}`)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b := batch
		if strings.HasSuffix(r.URL.Path, "/results") {
			b = body
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(b))), Request: r}, nil
	})}
	b, err := anthropic.NewBatch(anthropic.Config{BaseURL: "https://api.anthropic.test", APIKey: "sk-ant-k", HTTPClient: client})
	if err != nil {
		t.Fatalf("NewBatch = %v", err)
	}
	return b
}

// FuzzBatchResults feeds arbitrary bytes to Results as a batch's results
// file. It must not panic, and each result must have an answer or an
// error of a known class, never both.
func FuzzBatchResults(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","result":{"type":"succeeded","message":{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"cache_read_input_tokens":2,"output_tokens":1}}}}` + "\n"))
	f.Add([]byte(`{"custom_id":"b","result":{"type":"errored","error":{"type":"error","error":{"type":"overloaded_error","message":"m"}}}}` + "\n" +
		`{"custom_id":"c","result":{"type":"canceled"}}` + "\r\n" + `{"custom_id":"d","result":{"type":"expired"}}`))
	f.Add([]byte(`{"custom_id":"e","result":{"type":"succeeded","message":null}}`))
	f.Add([]byte(`{"custom_id":"f","result":{"type":"errored","error":"x"}}` + "\n\n{"))
	classes := []error{llm.ErrRateLimited, llm.ErrOverloaded, llm.ErrServer, llm.ErrTimeout,
		llm.ErrConnection, llm.ErrContextLength, llm.ErrBadRequest, llm.ErrAuth, batchmode.ErrUnanswered}
	f.Fuzz(func(t *testing.T, body []byte) {
		b := resultsBatch(t, body)
		err := b.Results(t.Context(), "msgbatch_1", batchmode.Status{State: batchmode.Ended}, func(r batchmode.Result) error {
			if (r.Resp == nil) == (r.Err == nil) {
				t.Errorf("result %q: Resp %v, Err %v; want exactly one", r.ID, r.Resp, r.Err)
			}
			if r.Err != nil && !slices.ContainsFunc(classes, func(c error) bool { return errors.Is(r.Err, c) }) {
				t.Errorf("result %q: Err %v of no known class", r.ID, r.Err)
			}
			return nil
		})
		if err != nil {
			t.Errorf("Results = %v", err)
		}
	})
}

func TestBatchResultsNotReady(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	s.endAfter = 100
	b := newBatch(t, s)
	id, err := b.Create(t.Context(), "", encode(t, b, "ok-1"), "tag")
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	err = b.Results(t.Context(), id, batchmode.Status{State: batchmode.Running}, func(batchmode.Result) error { return nil })
	if !errors.Is(err, llm.ErrServer) || !strings.Contains(err.Error(), "no results_url") {
		t.Errorf("Results(running batch) = %v, want an ErrServer saying it has no results_url", err)
	}
	if _, err := b.Poll(t.Context(), "msgbatch_404"); !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("Poll(unknown) = %v, want ErrBadRequest (404)", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Poll(ctx, id); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll(cancelled ctx) = %v, want context.Canceled", err)
	}
}

// TestBatchResultsOfAnotherProcess reads, with a Batch that encoded
// nothing, the structured answers of a batch another Batch submitted.
func TestBatchResultsOfAnotherProcess(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	first := newBatch(t, s)
	wrapped := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
		Output: &llm.OutputSpec{Name: "output", Schema: json.RawMessage(`{"type":"array"}`)}}
	object := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
		Tools:  []llm.ToolDef{{Name: "output"}},
		Output: &llm.OutputSpec{Name: "output", Schema: json.RawMessage(`{"type":"object"}`)}}
	var lines [][]byte
	for id, req := range map[string]*llm.Request{"ok-wrapped": wrapped, "ok-object": object, "ok-call": object} {
		line, err := first.Encode(id, req)
		if err != nil {
			t.Fatalf("Encode(%s) = %v", id, err)
		}
		lines = append(lines, line)
	}
	msg := func(name, input string) string {
		return `{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"` + name + `","input":` + input + `}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`
	}
	s.answer["ok-wrapped"] = msg("output", `{"value":[1]}`)
	s.answer["ok-object"] = msg("output_2", `{"value":{"a":1}}`)
	s.answer["ok-call"] = msg("output", `{"q":1}`) // the request's own tool named output
	id, err := first.Create(t.Context(), "", lines, "tag")
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	seen := pollUntilEnded(t, first, id)

	second := newBatch(t, s)
	got := results(t, second, id, seen[len(seen)-1])
	if r := got["ok-wrapped"]; r.Err != nil || r.Resp.Message.Content != "[1]" || len(r.Resp.Message.ToolCalls) != 0 {
		t.Errorf("wrapped answer = %+v, %v; want content [1]", r.Resp, r.Err)
	}
	if r := got["ok-object"]; r.Err != nil || r.Resp.Message.Content != `{"value":{"a":1}}` || len(r.Resp.Message.ToolCalls) != 0 {
		t.Errorf("object answer = %+v, %v; want content {\"value\":{\"a\":1}}", r.Resp, r.Err)
	}
	// Without the request, a call of the request's own tool named
	// "output" reads as the answer: the agent's validation catches it.
	if r := got["ok-call"]; r.Err != nil || r.Resp == nil {
		t.Errorf("call = %+v, %v; want an answer", r.Resp, r.Err)
	}
	// The process that encoded the lines reads the call as a call.
	if r := results(t, first, id, seen[len(seen)-1])["ok-call"]; r.Err != nil || len(r.Resp.Message.ToolCalls) != 1 {
		t.Errorf("call read by the encoding process = %+v, %v; want one tool call", r.Resp, r.Err)
	}
}
