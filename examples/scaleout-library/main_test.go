package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/redistest"
)

// TestRun coordinates 30 inputs over a redis-server through the worker in
// the same process: each input has one success line, then the summary.
func TestRun(t *testing.T) {
	const n = 30
	s := redistest.Start(t, redistest.Options{})
	var out bytes.Buffer
	if err := run(t.Context(), s.URL, n, &out); err != nil {
		t.Fatalf("run = %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want %d results and the summary:\n%s", len(lines), n, out.String())
	}
	seen := map[int]bool{}
	for _, line := range lines[:n] {
		var l struct {
			Index int             `json:"index"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Error != nil || seen[l.Index] {
			t.Errorf("line %s: want a success line of an index not seen before (%v)", line, err)
		}
		seen[l.Index] = true
	}
	if want := `{"failed":0,"inputs":30,"ok":30,"written":30}`; lines[n] != want {
		t.Errorf("summary = %s, want %s", lines[n], want)
	}
	if err := run(t.Context(), "", n, &out); err == nil {
		t.Error("run without a URL = nil, want an error")
	}
}
