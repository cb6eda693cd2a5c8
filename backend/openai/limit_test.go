package openai_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// TestGenerateBodyCap: a non-streamed answer whose body never ends (a
// server that ignores max_tokens) is read no further than
// llm.BodyLimit(max_tokens) and reported as an *llm.APIError wrapping
// llm.ErrTruncated, which is not transient. Before the cap, the body was
// read up to 64 MiB and reported as a (transient) server error.
func TestGenerateBodyCap(t *testing.T) {
	const giveUp = 96 << 20
	var written atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		io.Copy(io.Discard, r.Body) // read the request first, as a server does
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`))
		chunk := []byte(strings.Repeat("story ", 1000))
		for written.Load() < giveUp {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	_, err := m.Generate(t.Context(), &llm.Request{MaxTokens: 48, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Tell a story."}}})
	ae, ok := errors.AsType[*llm.APIError](err)
	if !ok || !errors.Is(err, llm.ErrTruncated) || llm.IsTransient(err) {
		t.Fatalf("Generate = %v, want a non-transient *llm.APIError wrapping ErrTruncated", err)
	}
	if !strings.Contains(ae.Message, "size cap (max_tokens 48)") {
		t.Errorf("message %q does not name the size cap and max_tokens", ae.Message)
	}
	<-done // the handler saw the connection close
	if w, limit := written.Load(), llm.BodyLimit(48); w > 3*limit+8<<20 {
		t.Errorf("server wrote %d bytes before the client went away, want near the cap %d", w, limit)
	}
}
