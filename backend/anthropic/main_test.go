package anthropic_test

import (
	"bytes"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newModel returns a Model for cfg, failing the test on an error. Without
// an HTTPClient in cfg it gets one whose idle connections close when the
// test ends.
func newModel(t testing.TB, cfg anthropic.Config) *anthropic.Model {
	t.Helper()
	if cfg.HTTPClient == nil {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return m
}

// roundTripFunc is an http.RoundTripper that answers without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// canned returns a client that answers every request with status, header
// and body, and records the body of the last request in *sent when sent is
// not nil.
func canned(status int, header http.Header, body []byte, sent *[]byte) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if sent != nil {
			*sent = b
		}
		h := header.Clone()
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{
			StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)), Request: r,
		}, nil
	})}
}

// jsonHeader is the header of a JSON answer; sseHeader of a stream.
var (
	jsonHeader = http.Header{"Content-Type": {"application/json"}}
	sseHeader  = http.Header{"Content-Type": {"text/event-stream"}}
)

// readFile returns a file of testdata.
func readFile(t testing.TB, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// collect runs a stream to its end, returning its events and its error.
func collect(seq iter.Seq2[llm.Event, error]) ([]llm.Event, error) {
	var evs []llm.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// accumulate reassembles events into a response.
func accumulate(evs []llm.Event) *llm.Response {
	var acc llm.Accumulator
	for _, ev := range evs {
		acc.Add(ev)
	}
	return acc.Response()
}

// jsonDiff compares two JSON documents as values. It may run in a
// handler: it does not stop the test.
func jsonDiff(t testing.TB, want, got []byte) string {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		return "want is invalid JSON: " + err.Error()
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return "got invalid JSON: " + err.Error() + "\n" + string(got)
	}
	return cmp.Diff(w, g)
}
