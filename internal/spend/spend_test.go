package spend_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// price is a dollar a completion token and nothing for the prompt: a
// call's worst case is exactly its max_tokens in dollars.
var price = llm.Price{Output: 1e6}

func request() *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "answer"}}, MaxTokens: 40}
}

// TestCapConcurrent: 200 calls at once through the simulator, streamed
// and not, against a cap of 10 worst-case calls: the cap is never passed,
// calls are refused with ErrCapReached and job.ErrStopped, and once one is
// refused every later call is too.
func TestCapConcurrent(t *testing.T) {
	m, err := sim.New(sim.Config{Seed: 1, Latency: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := spend.New(400) // ten calls of 40 tokens at their worst
	if err != nil {
		t.Fatal(err)
	}
	capped := c.Model(m, price)
	if _, ok := capped.(llm.Streamer); !ok {
		t.Fatal("capped simulator lost llm.Streamer")
	}
	if cp, ok := capped.(llm.Capable); !ok || !cp.Capabilities().InProcess {
		t.Fatal("capped simulator lost llm.Capable")
	}
	var (
		wg                  sync.WaitGroup
		mu                  sync.Mutex
		ok, refused, others int
	)
	for i := range 200 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = capped.Generate(t.Context(), request())
			} else {
				for _, e := range capped.(llm.Streamer).Stream(t.Context(), request()) {
					if e != nil {
						err = e
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, spend.ErrCapReached) && errors.Is(err, job.ErrStopped):
				refused++
			default:
				others++
				t.Errorf("call failed: %v", err)
			}
		})
	}
	wg.Wait()
	if ok < 10 || refused == 0 || ok+refused != 200 {
		t.Errorf("%d calls answered, %d refused, %d failed otherwise; want at least 10 answered and the rest refused", ok, refused, others)
	}
	if s := c.Spent(); s <= 0 || s > c.Limit() {
		t.Errorf("spent $%v of a $%v cap, want within it", s, c.Limit())
	}
	if !c.Reached() || c.Refused() != int64(refused) {
		t.Errorf("Reached %v, Refused %d; want true and %d", c.Reached(), c.Refused(), refused)
	}
	// Sticky: even a call that would fit now is refused.
	if _, err := capped.Generate(t.Context(), &llm.Request{Messages: request().Messages, MaxTokens: 1}); !errors.Is(err, spend.ErrCapReached) {
		t.Errorf("call after the cap was reached: %v, want refused", err)
	}
}

// TestCapCountsPriorSpend: spend added before the run counts, and a
// failed call costs nothing.
func TestCapCountsPriorSpend(t *testing.T) {
	m, err := sim.New(sim.Config{Seed: 1, FailRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := spend.New(100)
	if err != nil {
		t.Fatal(err)
	}
	capped := c.Model(m, price)
	if _, err := capped.Generate(t.Context(), request()); err == nil || errors.Is(err, spend.ErrCapReached) {
		t.Fatalf("call to a failing model: %v, want its failure", err)
	}
	if s := c.Spent(); s != 0 {
		t.Errorf("a failed call cost $%v, want nothing", s)
	}
	c.AddSpent(70) // 70 + 40 > 100
	if _, err := capped.Generate(t.Context(), request()); !errors.Is(err, spend.ErrCapReached) {
		t.Errorf("call past the cap with prior spend: %v, want refused", err)
	}
}

func TestNewRejectsBadLimits(t *testing.T) {
	for _, v := range []float64{0, -1} {
		if _, err := spend.New(v); err == nil {
			t.Errorf("New(%v) succeeded, want an error", v)
		}
	}
}
