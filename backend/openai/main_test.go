package openai_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newModel returns a Model for cfg, failing the test if cfg is invalid.
func newModel(t testing.TB, cfg openai.Config) *openai.Model {
	t.Helper()
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return m
}

// readFile returns a testdata file.
func readFile(t testing.TB, path ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// collect runs a stream to its end and returns its events and error.
func collect(seq func(func(llm.Event, error) bool)) ([]llm.Event, error) {
	var events []llm.Event
	for ev, err := range seq {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// accumulate reassembles events into a response.
func accumulate(events []llm.Event) *llm.Response {
	var acc llm.Accumulator
	for _, ev := range events {
		acc.Add(ev)
	}
	return acc.Response()
}

// jsonTransformer compares JSON texts as values.
var jsonTransformer = cmp.Transformer("json", func(r json.RawMessage) any {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return string(r)
	}
	return v
})

// fixedTransport answers every request with a 200 whose body is body and
// whose Content-Type is contentType, without any network.
type fixedTransport struct {
	contentType string
	body        []byte
}

func (f fixedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {f.contentType}},
		Body:          io.NopCloser(bytes.NewReader(f.body)),
		ContentLength: -1,
		Request:       req,
	}, nil
}

// offlineModel returns a Model whose every call gets body back.
func offlineModel(t testing.TB, contentType string, body []byte) *openai.Model {
	t.Helper()
	return newModel(t, openai.Config{
		BaseURL:    "http://offline.test/v1",
		Model:      "test-model",
		HTTPClient: &http.Client{Transport: fixedTransport{contentType: contentType, body: body}},
	})
}
