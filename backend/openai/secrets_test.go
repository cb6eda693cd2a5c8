package openai_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
)

// TestQueueDepthShowsNoURLPath probes metrics at a URL whose path holds a
// token, on a closed port and on a server answering 500: the errors name
// the metrics server by scheme and host only.
func TestQueueDepthShowsNoURLPath(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no metrics at "+r.URL.Path, http.StatusInternalServerError)
	}))
	defer failing.Close()
	for _, base := range []string{closed, failing.URL} {
		m := newModel(t, openai.Config{BaseURL: base + "/" + backendtest.PathToken + "/v1", APIKey: backendtest.APIKey,
			Flavor: openai.FlavorVLLM, MetricsURL: base + "/" + backendtest.PathToken + "/metrics"})
		_, err := m.QueueDepth(t.Context())
		if err == nil {
			t.Fatalf("QueueDepth against %s succeeded, want an error", base)
		}
		if what := backendtest.Leak(err.Error()); what != "" || !strings.Contains(err.Error(), base) {
			t.Errorf("QueueDepth error %q shows the %s, want only %s", err, what, base)
		}
		if s := fmt.Sprintf("%v %+v %#v", m, m, m); backendtest.Leak(s) != "" || !strings.Contains(s, base+")") {
			t.Errorf("printed Model %q, want it to name %s only", s, base)
		}
	}
}
