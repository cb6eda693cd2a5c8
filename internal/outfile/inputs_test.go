package outfile_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/llm"
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

// TestCheckInputsMedia: a saved state whose image hashes differently now,
// or cannot be hashed, is a changed input, named by its line and path; an
// unchanged one, a URL with no hash and an input already changed are not
// hashed again.
func TestCheckInputsMedia(t *testing.T) {
	dir := t.TempDir()
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte("{\"p\":\"a.png\"}\n{\"p\":\"b.png\"}\n{\"p\":\"c.png\"}\n{\"p\":\"u\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := map[string]string{"a.png": "aa", "b.png": "b2"} // c.png is gone
	var hashed []string
	hash := func(_ context.Context, ref string) (string, error) {
		hashed = append(hashed, ref)
		h, ok := now[ref]
		if !ok {
			return "", errors.New(ref + ": no such file under the media roots")
		}
		return h, nil
	}
	img := func(ref, hash string) []llm.Part { return []llm.Part{{Kind: llm.PartImage, Ref: ref, Hash: hash}} }
	in := []batchagent.Input{{"p": "a.png"}, {"p": "b.png"}, {"p": "c.png"}, {"p": "u"}}
	states := []agent.State{
		{Index: 0, Input: in[0], Media: img("a.png", "aa")},
		{Index: 1, Input: in[1], Media: img("b.png", "b1")},
		{Index: 2, Input: in[2], Media: img("c.png", "cc")},
		{Index: 3, Input: in[3], Media: img("https://cdn.test/u.png", "")},
	}
	c := outfile.CheckInputs(inputs(in...), states)
	if err := c.CheckMedia(t.Context(), states, hash); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.png", "b.png", "c.png"}; !slices.Equal(hashed, want) {
		t.Errorf("hashed %q, want %q", hashed, want)
	}
	if !c.Changed() {
		t.Fatal("Changed() = false, want true")
	}
	want := inPath + ":2: input 1: b.png changed since the last run; 2 inputs changed since the last run: hint"
	if got := c.Err(inPath, "s.db", "hint").Error(); got != want {
		t.Errorf("Err = %q, want %q", got, want)
	}
	plan := outfile.NewPlan(states, c, false, false)
	if got := plan.Dropped(); !slices.Equal(slices.Sorted(maps.Keys(got)), []int{1, 2}) {
		t.Errorf("Dropped = %v, want [1 2]", got)
	}

	// The file gone is named with the reason.
	hashed = nil
	c = outfile.CheckInputs(inputs(in...), states[2:3])
	if err := c.CheckMedia(t.Context(), states[2:3], hash); err != nil {
		t.Fatal(err)
	}
	want = inPath + ":3: input 2: c.png changed since the last run (no such file under the media roots); 1 inputs changed since the last run: hint"
	if got := c.Err(inPath, "s.db", "hint").Error(); got != want {
		t.Errorf("Err = %q, want %q", got, want)
	}

	// An edited input line is not hashed: it is changed already.
	hashed = nil
	edited := []agent.State{{Index: 0, Input: batchagent.Input{"p": "old.png"}, Media: img("old.png", "x")}}
	c = outfile.CheckInputs(inputs(in...), edited)
	if err := c.CheckMedia(t.Context(), edited, hash); err != nil || len(hashed) != 0 {
		t.Errorf("CheckMedia = %v, hashed %q; want nothing hashed", err, hashed)
	}
}
