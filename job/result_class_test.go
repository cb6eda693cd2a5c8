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

// TestFailureRoundTrip checks that a cause rebuilt from its saved chain
// (each link's message and classes) and problems answers errors.Is for
// every class and errors.As for a validation error as the original did,
// with the same text, link by link; a sentinel or a validation error comes
// back as itself. It covers the causes no saved result has in the engine's
// tests: a cancellation by an unavailable backend (two classes at once).
func TestFailureRoundTrip(t *testing.T) {
	problems := []schema.Problem{{Path: "$.a", Message: "got string, want integer"}, {Path: "$.b", Message: "missing"}}
	verr := &schema.ValidationError{Problems: problems, Raw: `{"a":"x"}`}
	api := &llm.APIError{Backend: "b", StatusCode: 429, Err: llm.ErrRateLimited}
	tests := []struct {
		name      string
		err       error
		wantClass string
		wantLinks int
	}{
		{"plain", errors.New("boom"), "", 1},
		{"plain wrapped", fmt.Errorf("outer: %w", errors.New("boom")), "", 1},
		{"sentinel itself", ErrMaxTurns, "max_turns", 1},
		{"api error", api, "rate_limited", 2},
		{"wrapped api error", fmt.Errorf("generate: %w", api), "rate_limited", 3},
		{"unavailable and canceled", errors.Join(context.Canceled, fmt.Errorf("%w: no answer for 1m: %w", ErrBackendUnavailable, llm.ErrConnection)),
			"connection,canceled,backend_unavailable", 1},
		{"validation itself", verr, "validation", 1},
		{"wrapped validation", fmt.Errorf("check: %w", verr), "validation", 2},
		{"checkpoint", fmt.Errorf("%w: %w", ErrCheckpoint, context.DeadlineExceeded), "deadline,checkpoint", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := &AgentError{JobID: "j", Agent: 3, Turn: 2, Op: "generate", Kind: Classify(tt.err, false, false), Err: tt.err}
			f := FailureOf(orig)
			if f.Kind != orig.Kind || f.Op != "generate" || f.Turn != 2 || len(f.Cause) != tt.wantLinks || f.Cause[0].Class != tt.wantClass {
				t.Errorf("FailureOf = %+v, want kind %s, op generate, turn 2, %d links, class %q", f, orig.Kind, tt.wantLinks, tt.wantClass)
			}
			ae := f.AgentError("j", 3, verr.Raw)
			if ae.Error() != orig.Error() || ae.Kind != orig.Kind {
				t.Errorf("restored = %q (kind %s), want %q (kind %s)", ae, ae.Kind, orig, orig.Kind)
			}
			if d, w := Describe(ae), Describe(orig); !gocmp.Equal(d, w) {
				t.Errorf("Describe(restored) = %+v, want %+v", d, w)
			}
			// Link by link down the chain, as far as it was saved.
			want := tt.err
			for i := range f.Cause {
				checkSameCause(t, firstLink(ae.Err, i), want)
				want = errors.Unwrap(want)
			}
			if (tt.err == ErrMaxTurns || tt.err == verr) && ae.Err != tt.err && !gocmp.Equal(ae.Err, tt.err) {
				t.Errorf("restored %T %v, want the original value", ae.Err, ae.Err)
			}
		})
	}
	t.Run("api error's sentinel comes back itself", func(t *testing.T) {
		ae := FailureOf(&AgentError{Err: api}).AgentError("j", 0, "")
		if inner := firstLink(ae.Err, 1); inner != llm.ErrRateLimited {
			t.Errorf("restored chain's second link = %#v, want llm.ErrRateLimited itself", inner)
		}
	})
	t.Run("saved before classes", func(t *testing.T) {
		f := &Failure{Kind: KindValidation, Cause: []Link{{Message: verr.Error()}}, Problems: problems}
		got := f.AgentError("j", 0, verr.Raw).Err
		if v, ok := errors.AsType[*schema.ValidationError](got); !ok || !gocmp.Equal(v, verr) {
			t.Errorf("restored without class, with problems = %#v, want %#v", got, verr)
		}
	})
	t.Run("unknown class", func(t *testing.T) {
		got := (&Failure{Cause: []Link{{Message: "later", Class: "from_the_future,rate_limited"}}}).AgentError("j", 0, "").Err
		if got.Error() != "later" || !errors.Is(got, llm.ErrRateLimited) {
			t.Errorf("restored with an unknown class = %q (rate limited %v), want text kept and the known class", got, errors.Is(got, llm.ErrRateLimited))
		}
	})
	t.Run("none", func(t *testing.T) {
		var f *Failure
		ae := f.AgentError("j", 4, "")
		if ae.Err == nil || ae.Err.Error() != "" || ae.Kind != "" || ae.Agent != 4 || ae.Turn != 0 {
			t.Errorf("nil Failure restored as %#v, want an error of agent 4 with no kind, turn or text", ae)
		}
	})
}

// firstLink returns the error n links down a restored chain: each link
// wraps the next one first.
func firstLink(err error, n int) error {
	for range n {
		u, ok := err.(interface{ Unwrap() []error })
		if !ok {
			return nil
		}
		err = u.Unwrap()[0]
	}
	return err
}

// checkSameCause fails unless got has want's text and answers errors.Is
// for the same classes and errors.As for the same validation error.
func checkSameCause(t *testing.T, got, want error) {
	t.Helper()
	if got == nil || got.Error() != want.Error() {
		t.Errorf("restored link %v, want text %q", got, want)
		return
	}
	for _, c := range errClasses {
		if errors.Is(got, c.err) != errors.Is(want, c.err) {
			t.Errorf("link %q: errors.Is(restored, %q) = %v, want %v", want, c.name, errors.Is(got, c.err), errors.Is(want, c.err))
		}
	}
	gv, gok := errors.AsType[*schema.ValidationError](got)
	wv, wok := errors.AsType[*schema.ValidationError](want)
	if gok != wok || gok && !gocmp.Equal(gv, wv) {
		t.Errorf("link %q: errors.As(restored) = %+v, %v; want %+v, %v", want, gv, gok, wv, wok)
	}
}

// TestFailureUnknownClassKeepsProblems checks that a failure whose classes
// are all unknown to this version (written by a later one) still restores
// its schema problems: they are saved only for a validation failure, and
// an export would otherwise drop them from the result line.
func TestFailureUnknownClassKeepsProblems(t *testing.T) {
	problems := []schema.Problem{{Path: "$.a", Message: "missing"}}
	f := &Failure{Kind: KindValidation, Op: "validate", Cause: []Link{{Message: "bad answer", Class: "from_the_future"}}, Problems: problems}
	got := f.AgentError("j", 0, `{}`).Err
	v, ok := errors.AsType[*schema.ValidationError](got)
	if !ok || !gocmp.Equal(v.Problems, problems) {
		t.Fatalf("restored %+v = %#v, want one answering errors.As with problems %v", f, got, problems)
	}
	if got.Error() != "bad answer" {
		t.Errorf("restored text = %q, want %q", got, "bad answer")
	}
	ae := &AgentError{Op: "validate", Kind: KindValidation, Err: got}
	if d := Describe(ae); !gocmp.Equal(d.Problems, problems) {
		t.Errorf("Describe(restored).Problems = %v, want %v", d.Problems, problems)
	}
}
