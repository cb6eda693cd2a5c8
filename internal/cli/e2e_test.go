package cli_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/tool/sqltool"
)

// startSimServer serves the HTTP simulator on a free loopback port until
// the test ends, and returns its address.
func startSimServer(t *testing.T, cfg simhttp.Config) (string, *simhttp.Server) {
	t.Helper()
	return startWrappedSimServer(t, cfg, nil)
}

// startWrappedSimServer is startSimServer with the simulator's handler
// passed through wrap, when it is not nil, to change or add endpoints.
func startWrappedSimServer(t *testing.T, cfg simhttp.Config, wrap func(http.Handler) http.Handler) (string, *simhttp.Server) {
	t.Helper()
	srv, err := simhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
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
	addr, srv := startSimServer(t, simhttp.Config{Model: sim.Config{Seed: 3}, MaxSeqs: 4,
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
	// The agents share their system prompt and tools: the server's prefix
	// cache hits, and the cached tokens it reports reach the summary.
	var prompt, cached string
	if i := strings.Index(stderr, "tokens: prompt "); i < 0 {
		t.Errorf("summary lacks the token line:\n%s", stderr)
	} else if _, err := fmt.Sscanf(stderr[i:], "tokens: prompt %s (cached %s", &prompt, &cached); err != nil || cached == "0" || cached == "0," {
		t.Errorf("summary reports cached tokens %q (err %v), want some:\n%s", cached, err, stderr)
	}
}

// TestRunWithSQLLookup runs a job whose agents look rows up in a real
// SQLite file through sql_lookup: concurrent lookups are batched.
func TestRunWithSQLLookup(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "shop.db")
	db, err := sqltool.OpenSQLite(dbPath, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, price INTEGER);
		INSERT INTO products VALUES ('k0','kettle',30),('k1','lamp',45),('k2','chair',80),('k3','desk',200);`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?latency=20ms&seed=4"
task: "Price check for key: {sku}"
output_schema:
  type: object
  properties: {ok: {type: boolean}}
  required: [ok]
tools:
  - name: sql_lookup
    database: shop.db
    table: products
    key: sku
    batch_window: 10ms
`)
	var in strings.Builder
	for i := range 40 {
		fmt.Fprintf(&in, "{\"sku\":\"k%d\"}\n", i%5) // k4 is missing: a tool error the model sees
	}
	inPath := writeFile(t, dir, "in.jsonl", in.String())
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", inPath)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if n := len(readLines(t, stdout)); n != 40 {
		t.Errorf("%d result lines, want 40", n)
	}
	// 40 lookups of 5 keys arriving within the batch window: far fewer
	// executions than calls.
	var req, exec int
	if _, err := fmt.Sscanf(stderr[strings.Index(stderr, "tool calls: requested"):], "tool calls: requested %d, executed %d", &req, &exec); err != nil {
		t.Fatalf("summary: %v\n%s", err, stderr)
	}
	if req != 40 || exec > 3 {
		t.Errorf("tool calls requested %d executed %d, want 40 and a handful", req, exec)
	}
}
