package batchagent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
)

// submitEngine returns an engine and a spec on a simulated model whose
// every call takes latency, admitted maxInflight at a time (0: no limit).
func submitEngine(t *testing.T, latency time.Duration, maxInflight int) (*batchagent.Engine, *sim.Model, *batchagent.Spec) {
	t.Helper()
	m, err := sim.New(sim.Config{Latency: latency, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: maxInflight, FixedInflight: maxInflight > 0}})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "s", Model: m, Task: "answer {q}"})
	if err != nil {
		t.Fatal(err)
	}
	return e, m, spec
}

// eventually polls cond until it holds, or fails the test after 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSubmitTryBeforeAndAfterCompletion(t *testing.T) {
	e, _, spec := submitEngine(t, 300*time.Millisecond, 0)
	h := e.Submit(t.Context(), spec, batchagent.Input{"q": "x"})
	if r, ok := h.Try(); ok {
		t.Fatalf("Try right after Submit = %+v, true; want not ready", r)
	}
	select {
	case <-h.Done():
		t.Fatal("Done closed right after Submit")
	default:
	}
	r, err := h.Wait(t.Context())
	if err != nil || r.Err != nil || len(r.Output) == 0 || r.Turns != 1 {
		t.Fatalf("Wait = %+v, %v; want one successful turn", r, err)
	}
	r2, ok := h.Try()
	if !ok || string(r2.Output) != string(r.Output) || r2.Index != r.Index {
		t.Fatalf("Try after completion = %+v, %t; want the result of Wait", r2, ok)
	}
	h2 := e.Submit(t.Context(), spec, batchagent.Input{"q": "y"})
	r3, err := h2.Wait(t.Context())
	if err != nil || r3.Index != r.Index+1 {
		t.Fatalf("second Submit: index %d, err %v; want %d", r3.Index, err, r.Index+1)
	}
}

func TestSubmitWaitWithCancelledContext(t *testing.T) {
	e, _, spec := submitEngine(t, time.Hour, 0)
	h := e.Submit(t.Context(), spec, batchagent.Input{"q": "x"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r, err := h.Wait(ctx); !errors.Is(err, context.Canceled) || r.Output != nil {
		t.Fatalf("Wait(cancelled ctx) = %+v, %v; want context.Canceled", r, err)
	}
	// The agent went on: Wait gave up, not the agent.
	if _, ok := h.Try(); ok {
		t.Fatal("the agent ended when a Wait gave up")
	}
	h.Cancel()
	r, err := h.Wait(t.Context())
	if err != nil || batchagent.KindOf(r.Err) != batchagent.KindCanceled {
		t.Fatalf("after Cancel: %+v, %v; want a canceled result", r, err)
	}
	h.Cancel() // again, after the end: nothing happens
}

func TestSubmitContextEndsTheAgent(t *testing.T) {
	e, _, spec := submitEngine(t, time.Hour, 0)
	ctx, cancel := context.WithCancel(t.Context())
	h := e.Submit(ctx, spec, batchagent.Input{"q": "x"})
	cancel()
	r, err := h.Wait(t.Context())
	if err != nil || batchagent.KindOf(r.Err) != batchagent.KindCanceled {
		t.Fatalf("Wait = %+v, %v; want a canceled result", r, err)
	}
}

func TestSubmitCancelFreesTheSlot(t *testing.T) {
	e, _, spec := submitEngine(t, time.Hour, 1)
	h1 := e.Submit(t.Context(), spec, batchagent.Input{"q": "1"})
	eventually(t, "h1 to hold the slot", func() bool { return e.Stats().Inflight == 1 })
	h2 := e.Submit(t.Context(), spec, batchagent.Input{"q": "2"})
	eventually(t, "h2 to wait", func() bool { return e.Stats().Waiting == 1 })
	h1.Cancel()
	if r, _ := h1.Wait(t.Context()); batchagent.KindOf(r.Err) != batchagent.KindCanceled {
		t.Fatalf("h1 = %+v, want canceled", r)
	}
	eventually(t, "h2 to get the slot", func() bool { s := e.Stats(); return s.Inflight == 1 && s.Waiting == 0 })
	if _, ok := h2.Try(); ok {
		t.Fatal("h2 ended; want it running in the freed slot")
	}
	h2.Cancel()
	h2.Wait(t.Context())
	eventually(t, "every slot free", func() bool { s := e.Stats(); return s.Inflight == 0 && s.Waiting == 0 })
}

func TestSubmitNilSpec(t *testing.T) {
	e, _, _ := submitEngine(t, 0, 0)
	r, ok := e.Submit(t.Context(), nil, batchagent.Input{}).Try()
	if !ok || !errors.Is(r.Err, batchagent.ErrBadJob) {
		t.Fatalf("Submit(nil spec) = %+v, %t; want a done handle with ErrBadJob", r, ok)
	}
}

func TestShutdownEndsEveryHandle(t *testing.T) {
	e, _, spec := submitEngine(t, time.Hour, 4)
	var hs []*batchagent.Handle
	for i := range 50 {
		hs = append(hs, e.Submit(t.Context(), spec, batchagent.Input{"q": fmt.Sprint(i)}))
	}
	eventually(t, "4 calls in flight", func() bool { return e.Stats().Inflight == 4 })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded: the calls in flight could not finish", err)
	}
	for i, h := range hs {
		r, ok := h.Try()
		if !ok {
			t.Fatalf("handle %d not done after Shutdown returned", i)
		}
		if batchagent.KindOf(r.Err) != batchagent.KindCanceled || !errors.Is(r.Err, batchagent.ErrShutdown) {
			t.Fatalf("handle %d: %v (kind %s), want canceled by ErrShutdown", i, r.Err, batchagent.KindOf(r.Err))
		}
	}
	if s := e.Stats(); s.Inflight != 0 || s.Waiting != 0 {
		t.Errorf("after Shutdown: %d in flight, %d waiting; want none", s.Inflight, s.Waiting)
	}
	r, ok := e.Submit(t.Context(), spec, batchagent.Input{"q": "late"}).Try()
	if !ok || !errors.Is(r.Err, batchagent.ErrShutdown) || batchagent.KindOf(r.Err) != batchagent.KindCanceled {
		t.Fatalf("Submit after Shutdown = %+v, %t; want a done, canceled handle", r, ok)
	}
	results, err := e.Run(t.Context(), spec, batchagent.Slice([]batchagent.Input{{"q": "a"}, {"q": "b"}}))
	if err != nil || len(results) != 2 || !errors.Is(results[1].Err, batchagent.ErrShutdown) {
		t.Fatalf("Run after Shutdown = %v, %v; want 2 results wrapping ErrShutdown", results, err)
	}
}

func TestShutdownLetsTurnsInFlightFinish(t *testing.T) {
	e, _, spec := submitEngine(t, 200*time.Millisecond, 20)
	var hs []*batchagent.Handle
	for i := range 20 {
		hs = append(hs, e.Submit(t.Context(), spec, batchagent.Input{"q": fmt.Sprint(i)}))
	}
	eventually(t, "the calls to start", func() bool { return e.Stats().Inflight == 20 })
	if err := e.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	for i, h := range hs {
		r, ok := h.Try()
		if !ok || r.Err != nil || len(r.Output) == 0 {
			t.Fatalf("handle %d = %+v, %t; want its single turn finished", i, r, ok)
		}
	}
}

// TestTwoBatchJobsShareTheBackend runs two equal batch jobs on one
// backend with 4 slots, the second started after every agent of the first
// queued for a slot: they must progress together. When either finishes,
// the other has done at least 90% of its inputs.
func TestTwoBatchJobsShareTheBackend(t *testing.T) {
	m, err := sim.New(sim.Config{Latency: 2 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: 4, FixedInflight: true}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	var done [2]atomic.Int64
	var atEnd [2]int64 // the other job's count when this one finished
	var wg sync.WaitGroup
	for j := range 2 {
		spec, err := batchagent.NewSpec(batchagent.Def{ID: fmt.Sprint("job", j), Model: m, Task: "job " + fmt.Sprint(j) + " {q}"})
		if err != nil {
			t.Fatal(err)
		}
		if j == 1 {
			eventually(t, "job 0 to queue", func() bool { return e.Stats().Waiting >= n/2 })
		}
		seq, err := e.Stream(t.Context(), spec, batchagent.Slice(inputsN(n)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for r := range seq {
				if r.Err != nil {
					t.Errorf("job %d input %d: %v", j, r.Index, r.Err)
				}
				if done[j].Add(1) == n {
					atEnd[j] = done[1-j].Load()
				}
			}
		})
	}
	wg.Wait()
	if atEnd[0] < n*9/10 && atEnd[1] < n*9/10 {
		t.Fatalf("when a job finished the other had done %d (job 0 ended) / %d (job 1 ended) of %d; want >= 90%%", atEnd[0], atEnd[1], n)
	}
	for j := range 2 {
		if atEnd[j] < n*9/10 && atEnd[j] != n {
			t.Errorf("job %d finished when job %d had done %d of %d: want >= 90%%", j, 1-j, atEnd[j], n)
		}
	}
}

func inputsN(n int) []batchagent.Input {
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"q": fmt.Sprint(i)}
	}
	return in
}

// TestInteractiveSubmitOvertakesABatch submits interactive agents into a
// backend saturated by 16 batch jobs whose calls queue by the hundred:
// each gets the next free slot, so while it waits and runs at most a few
// batch calls (those in flight, one per slot, those started beside it, and
// a result or two whose delivery lagged) end. A seventeenth batch job
// would wait its turn after the 16 others.
func TestInteractiveSubmitOvertakesABatch(t *testing.T) {
	m, err := sim.New(sim.Config{Latency: 20 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	const slots = 2
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: slots, FixedInflight: true}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := batchagent.NewSpec(batchagent.Def{ID: "batch", Model: m, Task: "batch {q}"})
	if err != nil {
		t.Fatal(err)
	}
	inter, err := batchagent.NewSpec(batchagent.Def{ID: "inter", Model: m, Task: "now {q}", Priority: batchagent.Interactive})
	if err != nil {
		t.Fatal(err)
	}
	var batchDone atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range 16 {
		seq, err := e.Stream(ctx, batch, batchagent.Slice(inputsN(100)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range seq {
				batchDone.Add(1)
			}
		})
	}
	eventually(t, "the batches to queue", func() bool { return e.Stats().Waiting > 400 })
	for i := range 5 {
		before := batchDone.Load()
		r, err := e.Submit(t.Context(), inter, batchagent.Input{"q": fmt.Sprint(i)}).Wait(t.Context())
		if err != nil || r.Err != nil {
			t.Fatalf("interactive %d: %+v, %v", i, r, err)
		}
		// Batch results delivered while it waited and ran: the calls in
		// flight when it came, and those started while it ran.
		if d := batchDone.Load() - before; d > 2*slots+2 {
			t.Errorf("interactive %d: %d batch results came while it waited; want at most %d", i, d, 2*slots+2)
		}
	}
	cancel()
	wg.Wait()
}
