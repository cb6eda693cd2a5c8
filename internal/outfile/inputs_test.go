package outfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/outfile"
)

func inputs(vs ...batchagent.Input) batchagent.Inputs {
	return func(yield func(batchagent.Input, error) bool) {
		for _, v := range vs {
			var err error
			if v == nil {
				err = errors.New("bad line")
			}
			if !yield(v, err) {
				return
			}
		}
	}
}

func TestCheckInputs(t *testing.T) {
	dir := t.TempDir()
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte("{\"id\":1}\n\n{\"id\":7}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	states := []agent.State{{Index: 0, Input: batchagent.Input{"id": 1}}, {Index: 1, Input: batchagent.Input{"id": 2}}}
	tests := []struct {
		name   string
		in     batchagent.Inputs
		states []agent.State
		want   string // "" for none changed
	}{
		{"same, one new", inputs(batchagent.Input{"id": 1}, batchagent.Input{"id": 2}, batchagent.Input{"id": 3}), states, ""},
		{"no states", inputs(batchagent.Input{"id": 9}), nil, ""},
		{"one edited", inputs(batchagent.Input{"id": 1}, batchagent.Input{"id": 7}), states,
			inPath + ":3: input 1 differs from the input its saved result in s.db was made from; 1 inputs changed since the last run: hint"},
		{"one bad", inputs(batchagent.Input{"id": 1}, nil), states,
			inPath + ":3: input 1 differs from the input its saved result in s.db was made from; 1 inputs changed since the last run: hint"},
		{"one gone", inputs(batchagent.Input{"id": 1}), states,
			"input 1 is no longer in " + inPath + " (it has 1 inputs), but s.db holds a result for it; 1 inputs changed since the last run: hint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := outfile.CheckInputs(tt.in, tt.states)
			if c.Changed() != (tt.want != "") {
				t.Fatalf("Changed() = %v, want %v", c.Changed(), tt.want != "")
			}
			if tt.want == "" {
				return
			}
			if got := c.Err(inPath, "s.db", "hint").Error(); got != tt.want {
				t.Errorf("Err = %q, want %q", got, tt.want)
			}
		})
	}
}
