package cli_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
)

// startSimServer serves the HTTP simulator on a free loopback port until
// the test ends, and returns its address.
func startSimServer(t *testing.T, cfg sim.ServerConfig) (string, *sim.Server) {
	t.Helper()
	srv, err := sim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	t.Cleanup(func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	})
	return ln.Addr().String(), srv
}

// TestRunAgainstHTTPSimulator runs the example job through the real
// OpenAI backend against the simulator served over HTTP: tool calls,
// schema validation and streaming all cross a real socket.
func TestRunAgainstHTTPSimulator(t *testing.T) {
	addr, srv := startSimServer(t, sim.ServerConfig{Model: sim.Config{Seed: 3}, MaxSeqs: 4,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 100 * time.Microsecond})
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", "../../examples/review/job.yaml", "--out", out,
		"--backend", "openai+http://"+addr+"/v1")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	if len(lines) != 6 {
		t.Fatalf("%d result lines, want 6", len(lines))
	}
	for _, l := range lines {
		if l.Error != nil || l.Output["risk"] == nil || l.Turns != 2 || l.ToolCalls != 1 {
			t.Errorf("line %d = %+v, want a valid review after one read_file call", l.Index, l)
		}
	}
	st := srv.Stats()
	if st.Requests != 12 || st.Rejected != 0 {
		t.Errorf("server saw %d requests (%d rejected), want 12 and 0", st.Requests, st.Rejected)
	}
	if !strings.Contains(stderr, "cached") {
		t.Errorf("summary lacks the cached-token share:\n%s", stderr)
	}
}
