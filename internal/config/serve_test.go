package config_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/config"
)

func TestLoadServeExample(t *testing.T) {
	sc, err := config.LoadServe(filepath.Join("..", "..", "examples", "serve", "serve.yaml"))
	if err != nil {
		t.Fatalf("LoadServe(examples/serve/serve.yaml) = %v", err)
	}
	if sc.Addr != "127.0.0.1:8080" || len(sc.Backends) != 1 || sc.Backends[0].Name != "sim" || sc.Backends[0].MaxInflight != 16 {
		t.Errorf("serve = addr %q backends %+v, want 127.0.0.1:8080 and sim with max_inflight 16", sc.Addr, sc.Backends)
	}
	if len(sc.Agents) != 1 || sc.Agents[0].Name != "reviewer" {
		t.Fatalf("agents = %+v, want reviewer", sc.Agents)
	}
	if len(sc.Prices) != 1 || sc.Prices[0] != (config.ServePrice{Model: "agent:reviewer", Input: 0.15, CachedInput: 0.075, Output: 0.6}) {
		t.Errorf("prices = %+v, want agent:reviewer's", sc.Prices)
	}
	j := sc.Agents[0].Job
	if j.Backend != sc.Backends[0].URL || len(j.Tools) != 1 || len(j.Def.OutputSchema) == 0 || j.Def.MaxTurns != 4 {
		t.Errorf("reviewer = backend %q tools %d schema %d bytes max turns %d, want the sim URL, read_file, the schema and 4",
			j.Backend, len(j.Tools), len(j.Def.OutputSchema), j.Def.MaxTurns)
	}
}

func TestParseServeProblems(t *testing.T) {
	data := `addr: nowhere
backends:
  a:
    model: x
    max_inflght: 3
keys:
  - sha256: abc
  - name: both
    env: K
    sha256: "` + strings.Repeat("0", 64) + `"
agents:
  rev:
    task: "Review {input}"
    inputs: x.jsonl
    limits: {max_turns: -1}
  bad: 3
surprise: 1
`
	_, err := config.ParseServe([]byte(data), "serve.yaml", t.TempDir())
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("ParseServe = %v, want a *config.Error", err)
	}
	want := []string{
		"addr: want HOST:PORT",
		"backends.a.max_inflght: unknown key",
		"backends.a.url: required key is missing",
		"keys[0].sha256: want 64 hex digits",
		"keys[1]: set exactly one of sha256",
		"agents.rev.inputs: an agent of the gateway takes no inputs",
		"agents.rev.limits.max_turns",
		"agents.bad: expected an agent",
		"surprise: unknown key",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("ParseServe error lacks %q:\n%v", w, err)
		}
	}
}

func TestParseServeBatchLimits(t *testing.T) {
	sc, err := config.ParseServe([]byte("backends:\n  sim:\n    url: sim://\nbatch:\n  max_lines: 10\n  max_bytes: 2048\n  concurrency: 3\n"), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if sc.Batch != (config.ServeBatch{MaxLines: 10, MaxBytes: 2048, Concurrency: 3}) {
		t.Errorf("batch = %+v, want 10 lines, 2048 bytes, 3 at once", sc.Batch)
	}
	_, err = config.ParseServe([]byte("batch:\n  concurrency: -1\n  lines: 3\n"), "serve.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `serve.yaml:3:3: batch.lines: unknown key "lines"`) || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("bad batch limits: %v, want both problems with their positions", err)
	}
}

// TestParseServeConnectionKeys: the timeouts and caps of the gateway's
// connections and its drain (issue 27, defects 5 and 6) are keys of the
// file; negative timeouts are problems, negative caps mean unlimited.
func TestParseServeConnectionKeys(t *testing.T) {
	data := `header_timeout: 5s
body_timeout: 30s
idle_timeout: 2m
max_connections: -1
max_connections_per_client: 32
shutdown_grace: 45s
batch: {upload_timeout: 20m}
backends: {sim: {url: "sim://"}}
`
	sc, err := config.ParseServe([]byte(data), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if sc.HeaderTimeout != 5*time.Second || sc.BodyTimeout != 30*time.Second || sc.IdleTimeout != 2*time.Minute ||
		sc.MaxConnections != -1 || sc.MaxConnectionsPerClient != 32 || sc.ShutdownGrace != 45*time.Second || sc.Batch.UploadTimeout != 20*time.Minute {
		t.Errorf("ParseServe = %+v, want every key read", sc)
	}
	_, err = config.ParseServe([]byte("body_timeout: -1s\nshutdown_grace: -2s\nbackends: {sim: {url: \"sim://\"}}\n"), "serve.yaml", t.TempDir())
	for _, want := range []string{"body_timeout: must not be negative", "shutdown_grace: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseServe(negative) = %v, want %q", err, want)
		}
	}
}

// TestServeKeyMaxCost: a key's max_cost and a price's cache_write are
// read; a max_cost that is not a finite number > 0 is a problem at its
// line.
func TestServeKeyMaxCost(t *testing.T) {
	sc, err := config.ParseServe([]byte("backends:\n  sim:\n    url: sim://\nkeys:\n  - name: ci\n    sha256: "+strings.Repeat("ab", 32)+"\n    max_cost: 2.5\nprices:\n  sim: {input: 3, output: 15, cache_write: 3.75}\n"), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	if len(sc.Keys) != 1 || sc.Keys[0].MaxCost != 2.5 {
		t.Errorf("keys = %+v, want ci with max_cost 2.5", sc.Keys)
	}
	if len(sc.Prices) != 1 || sc.Prices[0] != (config.ServePrice{Model: "sim", Input: 3, Output: 15, CacheWrite: 3.75}) {
		t.Errorf("prices = %+v, want sim's with cache_write 3.75", sc.Prices)
	}
	for _, bad := range []string{"-1", ".inf", ".nan"} {
		_, err := config.ParseServe([]byte("backends:\n  sim:\n    url: sim://\nkeys:\n  - name: ci\n    sha256: "+strings.Repeat("ab", 32)+"\n    max_cost: "+bad+"\n"), "serve.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "serve.yaml:7") || !strings.Contains(err.Error(), "keys[0].max_cost") {
			t.Errorf("max_cost %s: err = %v, want a problem at serve.yaml:7 naming keys[0].max_cost", bad, err)
		}
	}
}
