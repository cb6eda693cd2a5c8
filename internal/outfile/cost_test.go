package outfile_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/llm"
)

func TestSetCostAddsMember(t *testing.T) {
	var buf bytes.Buffer
	s := outfile.NewWriter(&buf, false)
	s.SetCost(func(r batchagent.Result) (float64, bool) {
		return float64(r.Usage.PromptTokens) / 1e6, r.Index != 1 // input 1: unknown
	})
	for i := range 3 {
		r := result(i)
		r.Usage = llm.Usage{PromptTokens: int64(1000 * (i + 1)), CompletionTokens: 7}
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []any{0.001, nil, 0.003}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d %q is not JSON: %v", i, line, err)
		}
		if got := v["cost"]; got != want[i] {
			t.Errorf("line %d cost = %v, want %v: %s", i, got, want[i], line)
		}
		// The result's own members are unchanged.
		var back batchagent.Result
		if err := json.Unmarshal([]byte(line), &back); err != nil {
			t.Fatalf("line %d does not decode as a result: %v", i, err)
		}
		if back.Index != i || back.Usage.CompletionTokens != 7 {
			t.Errorf("line %d decodes as index %d, usage %+v", i, back.Index, back.Usage)
		}
	}
}
