package config_test

import (
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
)

func TestParsePricing(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want *llm.Price
	}{
		{"none", "task: x\n", nil},
		{"all three", "task: x\npricing: {input: 2.5, cached_input: 1.25, output: 10}\n", &llm.Price{Input: 2.5, CachedInput: 1.25, Output: 10}},
		{"cache write", "task: x\npricing: {input: 3, output: 15, cache_write: 3.75}\n", &llm.Price{Input: 3, Output: 15, CacheWrite: 3.75}},
		{"integers, cached left out", "task: x\npricing:\n  input: 3\n  output: 15\n", &llm.Price{Input: 3, Output: 15}},
		{"free", "task: x\npricing: {}\n", &llm.Price{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := config.Parse([]byte(tc.in), "job.yaml", t.TempDir())
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			switch {
			case (j.Pricing == nil) != (tc.want == nil):
				t.Fatalf("Pricing = %+v, want %+v", j.Pricing, tc.want)
			case tc.want != nil && *j.Pricing != *tc.want:
				t.Fatalf("Pricing = %+v, want %+v", *j.Pricing, *tc.want)
			}
			// The job marshals back to a file that parses to the same price.
			out, err := yaml.Marshal(j)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			back, err := config.Parse(out, "job.yaml", t.TempDir())
			if err != nil {
				t.Fatalf("Parse(Marshal) of\n%s: %v", out, err)
			}
			if (back.Pricing == nil) != (tc.want == nil) || tc.want != nil && *back.Pricing != *tc.want {
				t.Errorf("after a round trip through\n%s Pricing = %+v, want %+v", out, back.Pricing, tc.want)
			}
		})
	}
}

func TestParsePricingProblems(t *testing.T) {
	runProblemCases(t, t.TempDir(), []problemCase{
		{
			name: "negative and not numbers",
			in:   "task: x\npricing:\n  input: -1\n  cached_input: .inf\n  output: ten\n",
			want: []config.Problem{
				{Line: 3, Col: 10, Path: "pricing.input", Msg: "must not be negative"},
				{Line: 4, Col: 17, Path: "pricing.cached_input", Msg: "must be a finite number, got +Inf"},
				{Line: 5, Col: 11, Path: "pricing.output", Msg: "cannot unmarshal !!str `ten` into float64"},
			},
		},
		{
			name: "unknown key",
			in:   "task: x\npricing: {input: 1, outptu: 2}\n",
			want: []config.Problem{
				{Line: 2, Col: 21, Path: "pricing.outptu", Msg: `unknown key "outptu" (did you mean "output"?)`},
			},
		},
		{
			name: "not a mapping",
			in:   "task: x\npricing: 2.5\n",
			want: []config.Problem{
				{Line: 2, Col: 10, Path: "pricing", Msg: `expected a mapping, got 2.5`},
			},
		},
	})
}
