package outfile_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/llm"
)

// TestExportSkipsRunning writes the finished states' lines in the order
// given and counts the running ones.
func TestExportSkipsRunning(t *testing.T) {
	states := []agent.State{
		{Index: 0, Status: agent.StatusDone, Output: json.RawMessage(`{"v":0}`)},
		{Index: 1, Status: agent.StatusRunning},
		{Index: 2, Status: agent.StatusDone, Output: json.RawMessage(`{"v":2}`)},
	}
	var buf bytes.Buffer
	written, unfinished, err := outfile.Export(&buf, "j", states)
	if err != nil || written != 2 || unfinished != 1 {
		t.Fatalf("Export = %d, %d, %v; want 2 written, 1 unfinished", written, unfinished, err)
	}
	if got := indexes(t, buf.String()); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("lines of indexes %v, want [0 2]:\n%s", got, buf.String())
	}
}

// TestWriteStatusText prints the counts, the failures by kind in name
// order, the tokens and the pace.
func TestWriteStatusText(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := checkpoint.Summary{JobID: "j", Inputs: 10,
		ByStatus: map[agent.Status]int{agent.StatusDone: 6, agent.StatusFailed: 2, agent.StatusRunning: 1},
		ByKind:   map[string]int{"timeout": 1, "schema": 1}, ModelCalls: 9, Turns: 8,
		Usage: llm.Usage{PromptTokens: 12345, CachedTokens: 100, CompletionTokens: 6789},
		First: first, Last: first.Add(4 * time.Second)}
	var b strings.Builder
	outfile.WriteStatus(&b, s)
	for _, want := range []string{"job j: 10 inputs · pending ", "done 6 · failed 2 · running 1\n",
		"  failed by kind: schema 1, timeout 1\n", "  model calls 9 · turns 8 · tokens: prompt ",
		"  2026-01-02 03:04:05 to 2026-01-02 03:04:09 (2.0 agents/s)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWriteStatusAgentSeconds writes an agent's timings and spans in
// seconds, rounded to microseconds.
func TestWriteStatusAgentSeconds(t *testing.T) {
	st := agent.State{Index: 3, Status: agent.StatusDone,
		Timings: agent.Timings{Inference: 1500 * time.Millisecond, Total: 2*time.Second + 1234567*time.Nanosecond},
		Spans:   []batchagent.Span{{Turn: 0, Inference: 1500 * time.Millisecond, Tier: 1}}}
	var b strings.Builder
	if err := outfile.WriteAgentState(&b, st); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Index   int                `json:"index"`
		Timings map[string]float64 `json:"timings"`
		Spans   []map[string]any   `json:"spans"`
	}
	if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if v.Index != 3 || v.Timings["inference_s"] != 1.5 || v.Timings["total_s"] != 2.001234 ||
		len(v.Spans) != 1 || v.Spans[0]["inference_s"] != 1.5 || v.Spans[0]["tier"] != 1.0 {
		t.Errorf("got %+v:\n%s", v, b.String())
	}
	if !strings.HasPrefix(b.String(), "{\n  \"") {
		t.Errorf("want indented JSON, got:\n%s", b.String())
	}
}
