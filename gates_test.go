package batchagent_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/sched"
)

// recordingShared is a hand-written sched.Shared that records the
// estimates it is asked to admit and the corrections it gets.
type recordingShared struct {
	mu       sync.Mutex // protects the fields below
	waits    int
	corrects int
	actual   int
}

func (s *recordingShared) Wait(ctx context.Context, tokens int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits++
	return nil
}

func (s *recordingShared) Correct(ctx context.Context, estimated, actual int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrects++
	s.actual += actual
}

// TestSharedRateLimit checks the wiring of RateLimit.Shared: it is asked
// once for the backend, and every model call waits on the budget it
// returns and corrects it with the call's usage.
func TestSharedRateLimit(t *testing.T) {
	m := newSim(t, sim.Config{ToolTurns: -1})
	sh := &recordingShared{}
	var asked []batchagent.Backend
	cfg := batchagent.Config{Admission: batchagent.Admission{RateLimit: batchagent.RateLimit{
		Shared: func(b batchagent.Backend) (sched.Shared, error) {
			asked = append(asked, b)
			return sh, nil
		},
	}}}
	_, res := runWith(t, cfg, batchagent.Def{Model: m, Task: "{id}"}, batchagent.Slice(inputs(20)))
	tokens := 0
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
		tokens += int(r.Usage.PromptTokens + r.Usage.CompletionTokens)
	}
	if len(asked) != 1 || asked[0].Model != m {
		t.Errorf("Shared asked for %v, want once for the sim backend", asked)
	}
	if sh.waits != 20 || sh.corrects != 20 || sh.actual != tokens {
		t.Errorf("shared budget: %d waits, %d corrections of %d tokens; want 20, 20 and the results' %d", sh.waits, sh.corrects, sh.actual, tokens)
	}
}

// TestSharedRateLimitError checks that a Shared func's error fails the
// run that names the backend, wrapped.
func TestSharedRateLimitError(t *testing.T) {
	down := errors.New("no redis")
	cfg := batchagent.Config{Admission: batchagent.Admission{RateLimit: batchagent.RateLimit{
		Shared: func(batchagent.Backend) (sched.Shared, error) { return nil, down },
	}}}
	e := newEngine(t, cfg)
	res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{Model: newSim(t, sim.Config{ToolTurns: -1}), Task: "{id}"}), batchagent.Slice(inputs(3)))
	if err == nil {
		for _, r := range res {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if !errors.Is(err, down) {
		t.Errorf("Run with a failing Shared = %v, want an error wrapping %v", err, down)
	}
}
