package job

import (
	"context"
	"errors"
	"fmt"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// TestRestoreCause checks that a cause rebuilt from its message, classes
// and problems (as a checkpoint saves them) answers errors.Is for every
// class and errors.As for a validation error as the original did, with the
// same text; a sentinel or a validation error comes back as itself. It
// covers the causes no saved result has in the engine's tests: a
// cancellation by an unavailable backend (two classes at once).
func TestRestoreCause(t *testing.T) {
	problems := []schema.Problem{{Path: "$.a", Message: "got string, want integer"}, {Path: "$.b", Message: "missing"}}
	verr := &schema.ValidationError{Problems: problems, Raw: `{"a":"x"}`}
	tests := []struct {
		name      string
		err       error
		wantClass string
	}{
		{"plain", errors.New("boom"), ""},
		{"sentinel itself", ErrMaxTurns, "max_turns"},
		{"api error", &llm.APIError{Backend: "b", StatusCode: 429, Err: llm.ErrRateLimited}, "rate_limited"},
		{"unavailable and canceled", errors.Join(context.Canceled, fmt.Errorf("%w: no answer for 1m: %w", ErrBackendUnavailable, llm.ErrConnection)),
			"connection,canceled,backend_unavailable"},
		{"validation itself", verr, "validation"},
		{"wrapped validation", fmt.Errorf("check: %w", verr), "validation"},
		{"checkpoint", fmt.Errorf("%w: %w", ErrCheckpoint, context.DeadlineExceeded), "deadline,checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := classOf(tt.err)
			if class != tt.wantClass {
				t.Errorf("classOf(%q) = %q, want %q", tt.err, class, tt.wantClass)
			}
			var ps []schema.Problem
			if v, ok := errors.AsType[*schema.ValidationError](tt.err); ok {
				ps = v.Problems
			}
			got := RestoreCause(tt.err.Error(), class, ps, verr.Raw)
			if got.Error() != tt.err.Error() {
				t.Errorf("restored text = %q, want %q", got, tt.err)
			}
			for _, c := range errClasses {
				if errors.Is(got, c.err) != errors.Is(tt.err, c.err) {
					t.Errorf("errors.Is(restored, %q) = %v, want %v", c.name, errors.Is(got, c.err), errors.Is(tt.err, c.err))
				}
			}
			gv, gok := errors.AsType[*schema.ValidationError](got)
			wv, wok := errors.AsType[*schema.ValidationError](tt.err)
			if gok != wok || gok && !gocmp.Equal(gv, wv) {
				t.Errorf("errors.As(restored) = %+v, %v; want %+v, %v", gv, gok, wv, wok)
			}
			if (tt.err == ErrMaxTurns || tt.err == verr) && got != tt.err && !gocmp.Equal(got, tt.err) {
				t.Errorf("restored %T %v, want the original value", got, got)
			}
		})
	}
	t.Run("saved before classes", func(t *testing.T) {
		got := RestoreCause(verr.Error(), "", problems, verr.Raw)
		if v, ok := errors.AsType[*schema.ValidationError](got); !ok || !gocmp.Equal(v, verr) {
			t.Errorf("restoreCause without class, with problems = %#v, want %#v", got, verr)
		}
	})
	t.Run("unknown class", func(t *testing.T) {
		got := RestoreCause("later", "from_the_future,rate_limited", nil, "")
		if got.Error() != "later" || !errors.Is(got, llm.ErrRateLimited) {
			t.Errorf("restoreCause with an unknown class = %q (rate limited %v), want text kept and the known class", got, errors.Is(got, llm.ErrRateLimited))
		}
	})
}

// TestRestoreCauseUnknownClassKeepsProblems checks that a state whose
// classes are all unknown to this version (written by a later one) still
// restores its schema problems: they are saved only for a validation
// failure, and an export would otherwise drop them from the result line.
func TestRestoreCauseUnknownClassKeepsProblems(t *testing.T) {
	problems := []schema.Problem{{Path: "$.a", Message: "missing"}}
	got := RestoreCause("bad answer", "from_the_future", problems, `{}`)
	v, ok := errors.AsType[*schema.ValidationError](got)
	if !ok || !gocmp.Equal(v.Problems, problems) {
		t.Fatalf("RestoreCause(%q, %q, problems) = %#v, want one answering errors.As with problems %v", "bad answer", "from_the_future", got, problems)
	}
	if got.Error() != "bad answer" {
		t.Errorf("restoreCause text = %q, want %q", got, "bad answer")
	}
	ae := &AgentError{Op: "validate", Kind: KindValidation, Err: got}
	if d := Describe(ae); !gocmp.Equal(d.Problems, problems) {
		t.Errorf("Describe(restored).Problems = %v, want %v", d.Problems, problems)
	}
}
