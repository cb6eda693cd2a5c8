package anthropic_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// batchServer implements Anthropic's Message Batches API as documented:
// create, retrieve, list (newest first, paged by after_id), cancel and the
// results JSONL at results_url. A batch is in_progress for endAfter polls,
// then ended; each request's outcome comes from its custom_id's prefix:
// "ok" succeeded (answered with the message of answer, or a plain text),
// "bad" errored with invalid_request_error, "ovl" errored with
// overloaded_error, "exp" expired. A cancelled batch is canceling for one
// poll, then ended with every request canceled. The handlers record what
// they saw; every field is guarded by mu.
type batchServer struct {
	t   *testing.T
	srv *httptest.Server
	// key is the API key the server requires.
	key string
	// endAfter is how many polls a batch stays in_progress.
	endAfter int
	// pageSize bounds a page of the list below the limit asked.
	pageSize int

	mu sync.Mutex // protects the fields below
	// batches in the order of creation.
	batches []*fakeBatch
	// failCreate, when set, answers the next create with this status and
	// error type.
	failCreate     int
	failCreateType string
	// resultsHost, when set, is the server that serves results_url.
	resultsHost *httptest.Server
	// answer, by custom_id, is the message of a succeeded request.
	answer map[string]string
	// listCalls counts the list requests; betas holds each create's
	// anthropic-beta header.
	listCalls int
	betas     []string
	// resultKeys holds the x-api-key header of each results request.
	resultKeys []string
	// decide, when set, gives the outcome of request q of batch b (and,
	// when it succeeded, its message, "" for the plain text) in place of
	// the custom_id's prefix: for callers whose custom_ids are not theirs
	// to choose (batchmode.Model). "" keeps the prefix's outcome.
	decide func(b *fakeBatch, q fakeRequest) (outcome, msg string)
}

type fakeBatch struct {
	id        string
	created   time.Time
	requests  []fakeRequest
	polls     int
	cancelled bool
	ended     bool
}

type fakeRequest struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

var fakeCustomID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func newBatchServer(t *testing.T) *batchServer {
	t.Helper()
	s := &batchServer{t: t, key: "sk-ant-test-key", endAfter: 2, pageSize: 100, answer: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages/batches", s.create)
	mux.HandleFunc("GET /v1/messages/batches", s.list)
	mux.HandleFunc("GET /v1/messages/batches/{id}", s.retrieve)
	mux.HandleFunc("POST /v1/messages/batches/{id}/cancel", s.cancel)
	mux.HandleFunc("GET /v1/messages/batches/{id}/results", s.results)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// apiError writes Anthropic's error envelope.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
}

// authorized checks the headers every API request carries.
func (s *batchServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("anthropic-version") != "2023-06-01" {
		apiError(w, 400, "invalid_request_error", "anthropic-version: header is required")
		return false
	}
	if r.Header.Get("x-api-key") != s.key {
		apiError(w, 401, "authentication_error", "invalid x-api-key")
		return false
	}
	return true
}

func (s *batchServer) create(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var body struct {
		Requests []fakeRequest `json:"requests"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		apiError(w, 400, "invalid_request_error", "requests: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCreate != 0 {
		status, typ := s.failCreate, s.failCreateType
		s.failCreate = 0
		w.Header().Set("retry-after", "7")
		apiError(w, status, typ, "try later")
		return
	}
	if len(body.Requests) == 0 || len(body.Requests) > 100_000 {
		apiError(w, 400, "invalid_request_error", "requests: between 1 and 100000 items")
		return
	}
	seen := map[string]bool{}
	for i, q := range body.Requests {
		if !fakeCustomID.MatchString(q.CustomID) || seen[q.CustomID] {
			apiError(w, 400, "invalid_request_error", fmt.Sprintf("requests.%d.custom_id: invalid or duplicate", i))
			return
		}
		seen[q.CustomID] = true
		var p map[string]json.RawMessage
		if err := json.Unmarshal(q.Params, &p); err != nil || p["model"] == nil || p["max_tokens"] == nil || p["messages"] == nil {
			apiError(w, 400, "invalid_request_error", fmt.Sprintf("requests.%d.params: model, max_tokens and messages are required", i))
			return
		}
		if p["stream"] != nil {
			apiError(w, 400, "invalid_request_error", fmt.Sprintf("requests.%d.params.stream: not supported in batches", i))
			return
		}
	}
	b := &fakeBatch{id: "msgbatch_" + strconv.Itoa(len(s.batches)+1), created: time.Now(), requests: body.Requests}
	s.batches = append(s.batches, b)
	s.betas = append(s.betas, r.Header.Get("anthropic-beta"))
	s.writeJSON(w, s.object(b))
}

// find returns the batch of r's path, or answers 404.
func (s *batchServer) find(w http.ResponseWriter, r *http.Request) *fakeBatch {
	for _, b := range s.batches {
		if b.id == r.PathValue("id") {
			return b
		}
	}
	apiError(w, 404, "not_found_error", "batch not found")
	return nil
}

func (s *batchServer) retrieve(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(w, r)
	if b == nil {
		return
	}
	b.polls++
	if b.cancelled && b.polls > 1 || b.polls > s.endAfter {
		b.ended = true
	}
	s.writeJSON(w, s.object(b))
}

func (s *batchServer) cancel(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(w, r)
	if b == nil {
		return
	}
	if !b.ended {
		b.cancelled, b.polls = true, 0
	}
	s.writeJSON(w, s.object(b))
}

func (s *batchServer) list(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listCalls++
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit < 1 || limit > 1000 {
		apiError(w, 400, "invalid_request_error", "limit: between 1 and 1000")
		return
	}
	limit = min(limit, s.pageSize)
	newest := slices.Clone(s.batches)
	slices.Reverse(newest)
	start := 0
	if after := r.URL.Query().Get("after_id"); after != "" {
		start = slices.IndexFunc(newest, func(b *fakeBatch) bool { return b.id == after }) + 1
	}
	end := min(start+limit, len(newest))
	page := map[string]any{"data": []any{}, "has_more": end < len(newest), "first_id": nil, "last_id": nil}
	var data []any
	for _, b := range newest[start:end] {
		data = append(data, s.object(b))
	}
	if len(data) > 0 {
		page["data"], page["first_id"], page["last_id"] = data, newest[start].id, newest[end-1].id
	}
	s.writeJSON(w, page)
}

// outcome is the result type of request q of batch b.
func outcome(b *fakeBatch, q fakeRequest) string {
	switch {
	case b.cancelled:
		return "canceled"
	case strings.HasPrefix(q.CustomID, "ok"):
		return "succeeded"
	case strings.HasPrefix(q.CustomID, "bad"), strings.HasPrefix(q.CustomID, "ovl"):
		return "errored"
	default:
		return "expired"
	}
}

// outcome is the result type of request q of batch b, and the message of
// a succeeded one ("": the plain text). s.mu is held.
func (s *batchServer) outcome(b *fakeBatch, q fakeRequest) (string, string) {
	if s.decide != nil && !b.cancelled {
		if o, msg := s.decide(b, q); o != "" {
			return o, msg
		}
	}
	return outcome(b, q), s.answer[q.CustomID]
}

// object is b as the API shows it.
func (s *batchServer) object(b *fakeBatch) map[string]any {
	counts := map[string]int{"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	status := "in_progress"
	var resultsURL, cancelAt any
	if b.cancelled {
		status, cancelAt = "canceling", b.created.Add(time.Second).Format(time.RFC3339)
	}
	if b.ended {
		status = "ended"
		for _, q := range b.requests {
			o, _ := s.outcome(b, q)
			counts[o]++
		}
		host := s.srv
		if s.resultsHost != nil {
			host = s.resultsHost
		}
		resultsURL = host.URL + "/v1/messages/batches/" + b.id + "/results"
	} else {
		counts["processing"] = len(b.requests)
	}
	return map[string]any{
		"id": b.id, "type": "message_batch", "processing_status": status, "request_counts": counts,
		"created_at": b.created.UTC().Format(time.RFC3339Nano), "expires_at": b.created.Add(24 * time.Hour).UTC().Format(time.RFC3339),
		"ended_at": nil, "archived_at": nil, "cancel_initiated_at": cancelAt, "results_url": resultsURL,
	}
}

func (s *batchServer) results(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resultKeys = append(s.resultKeys, r.Header.Get("x-api-key"))
	b := s.find(w, r)
	if b == nil {
		return
	}
	if !b.ended {
		apiError(w, 400, "invalid_request_error", "batch has not ended")
		return
	}
	w.Header().Set("Content-Type", "application/binary")
	for _, q := range b.requests {
		var res string
		o, msg := s.outcome(b, q)
		switch o {
		case "succeeded":
			if msg == "" {
				msg = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"answer ` + q.CustomID + `"}],` +
					`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":3}}`
			}
			res = `{"type":"succeeded","message":` + msg + `}`
		case "errored":
			typ := "invalid_request_error"
			if strings.HasPrefix(q.CustomID, "ovl") {
				typ = "overloaded_error"
			}
			res = `{"type":"errored","error":{"type":"error","error":{"type":"` + typ + `","message":"request ` + q.CustomID + ` failed"}}}`
		default:
			res = `{"type":"` + o + `"}`
		}
		fmt.Fprintf(w, "{\"custom_id\":%q,\"result\":%s}\n", q.CustomID, res)
	}
}

func (s *batchServer) writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.t.Errorf("encode answer: %v", err)
	}
}
