package batchagent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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

// chanSlots is a hand-written sched.SharedSlots: n slots as a buffered
// channel, recording the peak held and the clean releases.
type chanSlots struct {
	slots chan struct{} // a token per held slot; buffer n

	mu    sync.Mutex // protects peak and clean
	peak  int
	clean int
}

func (s *chanSlots) Acquire(ctx context.Context) (string, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peak = max(s.peak, len(s.slots))
	return "lease", nil
}

func (s *chanSlots) Release(ctx context.Context, lease string, clean, congested bool) {
	<-s.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	if clean {
		s.clean++
	}
}

// TestSharedInflight checks the wiring of Admission.SharedInflight: every
// model call holds one of the shared slots, so no more than they are run
// at once, and reports its outcome.
func TestSharedInflight(t *testing.T) {
	m := newSim(t, sim.Config{ToolTurns: -1, Latency: 5 * time.Millisecond})
	sl := &chanSlots{slots: make(chan struct{}, 2)}
	cfg := batchagent.Config{Admission: batchagent.Admission{
		SharedInflight: func(batchagent.Backend) (sched.SharedSlots, error) { return sl, nil },
	}}
	_, res := runWith(t, cfg, batchagent.Def{Model: m, Task: "{id}"}, batchagent.Slice(inputs(20)))
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
	}
	if sl.peak != 2 || sl.clean != 20 || len(sl.slots) != 0 {
		t.Errorf("shared slots: peak %d, %d clean releases, %d held at the end; want 2, 20, 0", sl.peak, sl.clean, len(sl.slots))
	}
}
