package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestRunSendsSamplingKnobs runs a job file that sets max_tokens,
// temperature, top_p, seed and stop through the real OpenAI backend
// against the HTTP simulator, and checks the request bodies the server
// received: the simulator accepts them and every request carries them.
func TestRunSendsSamplingKnobs(t *testing.T) {
	srv, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: 1}, PrefillPerToken: time.Microsecond, DecodeStep: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		bodies []map[string]any // protected by mu
	)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil && m["messages"] != nil {
			mu.Lock()
			bodies = append(bodies, m)
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		srv.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &http.Server{Handler: record, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	defer func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	}()

	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `task: "Greet {name}"
max_tokens: 200
temperature: 0
top_p: 0.5
seed: 7
stop: ["STOP"]
limits:
  backoff: {base: 1ms, max: 10ms}
tool_pool: {cache_size: -1}
`+objectSchema)
	in := writeFile(t, dir, "in.jsonl", "{\"name\":\"a\"}\n{\"name\":\"b\"}\n")
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--quiet", "--backend", "sim+http://"+ln.Addr().String()+"/v1")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) < 2 {
		t.Fatalf("server received %d chat requests, want at least 2", len(bodies))
	}
	want := map[string]any{"max_tokens": 200.0, "temperature": 0.0, "top_p": 0.5, "seed": 7.0, "stop": []any{"STOP"}}
	for i, b := range bodies {
		got := map[string]any{}
		for k := range want {
			got[k] = b[k]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("request %d sampling fields (-want +got):\n%s", i, diff)
		}
	}
}
