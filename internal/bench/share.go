package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
)

// Defaults of the submit and share scenarios.
const (
	submitInFlight = 10_000                 // agents in flight before the measured Submits
	submitMeasured = 1_000                  // measured Submit calls
	submitLatency  = 500 * time.Millisecond // each model call
	submitSlots    = 1024                   // the backend's slots

	shareN           = 1_000 // agents per batch job
	shareInteractive = 50
	shareSlots       = 8
	shareLatency     = 10 * time.Millisecond
)

// ShareReport holds the fields of the submit and share scenarios beside
// Report's.
type ShareReport struct {
	Report
	// Submit: the latency of Submit calls made while InFlight agents were
	// in flight.
	SubmitP50US *float64 `json:"submit_p50_us,omitempty"`
	SubmitP99US *float64 `json:"submit_p99_us,omitempty"`
	SubmitMaxUS *float64 `json:"submit_max_us,omitempty"`
	InFlight    int      `json:"in_flight,omitempty"`
	// Share: each batch job's wall time from their common start, their
	// gap (|a-b| / max(a, b)), and the wait of interactive agents for a
	// slot, against one slot turnover (the longest a slot is held: one
	// model call).
	JobAWallS            *float64 `json:"job_a_wall_s,omitempty"`
	JobBWallS            *float64 `json:"job_b_wall_s,omitempty"`
	JobGap               *float64 `json:"job_gap,omitempty"`
	InteractiveWaitP50S  *float64 `json:"interactive_wait_p50_s,omitempty"`
	InteractiveWaitP95S  *float64 `json:"interactive_wait_p95_s,omitempty"`
	InteractiveWaitMaxS  *float64 `json:"interactive_wait_max_s,omitempty"`
	SlotTurnoverS        *float64 `json:"slot_turnover_s,omitempty"`
	InteractiveSubmitted int      `json:"interactive,omitempty"`
}

func ptr(v float64) *float64 { return &v }

// quantile returns the q-quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runShareScenario runs the submit or share scenario, opt.Count times,
// and writes the report of median wall time.
func runShareScenario(ctx context.Context, scenario string, opt Options, w io.Writer) ([]Report, error) {
	if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Dir != "" || opt.Corrupt != 0 {
		return nil, fmt.Errorf("bench: %s takes only -n, --count, --seed, --mode engine and --json", scenario)
	}
	if opt.N < 0 || opt.Count < 0 {
		return nil, errors.New("bench: -n and -count must be positive")
	}
	for _, m := range opt.Modes {
		if m != "engine" {
			return nil, fmt.Errorf("bench: unknown mode %q for %s (known: engine)", m, scenario)
		}
	}
	seed := opt.Seed
	if seed == 0 {
		seed = 1
	}
	var runs []ShareReport
	for range max(opt.Count, 1) {
		var (
			r   ShareReport
			err error
		)
		if scenario == "submit" {
			r, err = runSubmit(ctx, opt.N, seed)
		} else {
			r, err = runShare(ctx, opt.N, seed)
		}
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b ShareReport) int { return int(math.Copysign(1, a.WallS-b.WallS)) })
	rep := runs[(len(runs)-1)/2]
	if len(runs) > 1 {
		rep.Runs = len(runs)
	}
	if opt.JSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(w, string(b))
	} else if scenario == "submit" {
		fmt.Fprintf(w, "submit: %d Submit calls with %d agents in flight: p50 %.1f µs, p99 %.1f µs, max %.1f µs; %d ok, %d failed in %.2f s\n",
			submitMeasured, rep.InFlight, *rep.SubmitP50US, *rep.SubmitP99US, *rep.SubmitMaxUS, rep.OK, rep.Failed, rep.WallS)
	} else {
		fmt.Fprintf(w, "share: job A %.3f s, job B %.3f s (gap %.1f %%); %d interactive agents waited p50 %.4f s, p95 %.4f s, max %.4f s for a slot (one slot turnover: %.3f s); %d ok, %d failed\n",
			*rep.JobAWallS, *rep.JobBWallS, 100**rep.JobGap, rep.InteractiveSubmitted, *rep.InteractiveWaitP50S, *rep.InteractiveWaitP95S,
			*rep.InteractiveWaitMaxS, *rep.SlotTurnoverS, rep.OK, rep.Failed)
	}
	return []Report{rep.Report}, nil
}

// slotEngine returns a simulated model whose calls take latency and an
// engine that admits slots of them at once.
func slotEngine(latency time.Duration, slots int, seed uint64) (*sim.Model, *batchagent.Engine, error) {
	m, err := sim.New(sim.Config{Latency: latency, Seed: seed})
	if err != nil {
		return nil, nil, err
	}
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: slots, FixedInflight: true}})
	return m, e, err
}

// fill sets the fields every scenario reports for n agents run in wall
// on slots slots whose calls take latency: the ideal is that many rounds
// of one call each.
func (r *ShareReport) fill(scenario string, n int, wall, latency time.Duration, slots int, e *batchagent.Engine, cpu0 time.Duration) {
	r.Scenario, r.Mode, r.N = scenario, "engine", n
	r.WallS = round(wall.Seconds(), 3)
	ideal := time.Duration(math.Ceil(float64(n)/float64(slots))) * latency
	r.IdealS = round(ideal.Seconds(), 3)
	r.Ratio = round(wall.Seconds()/ideal.Seconds(), 2)
	r.AgentsPerS = round(float64(n)/wall.Seconds(), 0)
	r.LLMCalls = e.Stats().ModelCalls
	r.MaxInflight = slots
	r.PeakRSSMB = round(peakRSSMB(), 1)
	r.CPUS = round((cpuTime() - cpu0).Seconds(), 3)
}

// runSubmit submits n agents (default 10,000) to one engine, whose model
// calls take submitLatency, then measures submitMeasured more Submit calls
// while they are in flight, and waits for every result.
func runSubmit(ctx context.Context, n int, seed uint64) (ShareReport, error) {
	if n == 0 {
		n = submitInFlight
	}
	m, e, err := slotEngine(submitLatency, submitSlots, seed)
	if err != nil {
		return ShareReport{}, err
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "submit", Model: m, Task: "Answer {q}"})
	if err != nil {
		return ShareReport{}, err
	}
	resetPeakRSS()
	cpu0 := cpuTime()
	start := time.Now()
	handles := make([]*batchagent.Handle, 0, n+submitMeasured)
	for i := range n {
		handles = append(handles, e.Submit(ctx, spec, batchagent.Input{"q": i}))
	}
	st := e.Stats()
	inFlight := int(st.Started - st.Done)
	lat := make([]float64, submitMeasured)
	for i := range submitMeasured {
		t0 := time.Now()
		h := e.Submit(ctx, spec, batchagent.Input{"q": n + i})
		lat[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
		handles = append(handles, h)
	}
	r := ShareReport{InFlight: inFlight}
	for _, h := range handles {
		res, err := h.Wait(ctx)
		if err != nil {
			return ShareReport{}, err
		}
		if res.Err != nil {
			r.Failed++
		} else {
			r.OK++
		}
	}
	wall := time.Since(start)
	slices.Sort(lat)
	r.fill("submit", len(handles), wall, submitLatency, submitSlots, e, cpu0)
	r.SubmitP50US = ptr(round(quantile(lat, 0.5), 1))
	r.SubmitP99US = ptr(round(quantile(lat, 0.99), 1))
	r.SubmitMaxUS = ptr(round(lat[len(lat)-1], 1))
	return r, nil
}

// runShare runs two batch jobs of n agents each (default 1,000) at once
// on one backend with shareSlots slots, and shareInteractive interactive
// Submits spread over their run.
func runShare(ctx context.Context, n int, seed uint64) (ShareReport, error) {
	if n == 0 {
		n = shareN
	}
	m, e, err := slotEngine(shareLatency, shareSlots, seed)
	if err != nil {
		return ShareReport{}, err
	}
	var specs [2]*batchagent.Spec
	for j, name := range []string{"a", "b"} {
		if specs[j], err = batchagent.NewSpec(batchagent.Def{ID: "job-" + name, Model: m, Task: "Job " + name + ": answer {q}"}); err != nil {
			return ShareReport{}, err
		}
	}
	inter, err := batchagent.NewSpec(batchagent.Def{ID: "interactive", Model: m, Task: "Now: answer {q}", Priority: batchagent.Interactive})
	if err != nil {
		return ShareReport{}, err
	}
	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"q": i}
	}
	resetPeakRSS()
	cpu0 := cpuTime()
	start := time.Now()
	var (
		wg      sync.WaitGroup
		walls   [2]time.Duration
		results [2][]batchagent.Result
		errs    [2]error
	)
	for j := range 2 {
		wg.Go(func() {
			results[j], errs[j] = e.Run(ctx, specs[j], batchagent.Slice(inputs))
			walls[j] = time.Since(start)
		})
	}
	// The interactive agents come at even intervals over the batch's
	// expected duration.
	expected := time.Duration(2*n/shareSlots) * shareLatency
	every := expected / (shareInteractive + 1)
	handles := make([]*batchagent.Handle, 0, shareInteractive)
	tick := time.NewTicker(every)
	for range shareInteractive {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		handles = append(handles, e.Submit(ctx, inter, batchagent.Input{"q": len(handles)}))
	}
	tick.Stop()
	var waits []float64
	r := ShareReport{InteractiveSubmitted: len(handles)}
	for _, h := range handles {
		res, err := h.Wait(ctx)
		if err != nil {
			return ShareReport{}, err
		}
		if res.Err != nil {
			r.Failed++
			continue
		}
		r.OK++
		waits = append(waits, res.Timings.Queue.Seconds())
	}
	wg.Wait()
	wall := time.Since(start)
	for j := range 2 {
		if errs[j] != nil {
			return ShareReport{}, errs[j]
		}
		for _, res := range results[j] {
			if res.Err != nil {
				r.Failed++
			} else {
				r.OK++
			}
		}
	}
	slices.Sort(waits)
	a, b := walls[0].Seconds(), walls[1].Seconds()
	r.fill("share", 2*n+len(handles), wall, shareLatency, shareSlots, e, cpu0)
	r.JobAWallS, r.JobBWallS = ptr(round(a, 3)), ptr(round(b, 3))
	r.JobGap = ptr(round(math.Abs(a-b)/max(a, b), 4))
	r.InteractiveWaitP50S = ptr(round(quantile(waits, 0.5), 4))
	r.InteractiveWaitP95S = ptr(round(quantile(waits, 0.95), 4))
	if len(waits) > 0 {
		r.InteractiveWaitMaxS = ptr(round(waits[len(waits)-1], 4))
	} else {
		r.InteractiveWaitMaxS = ptr(0)
	}
	r.SlotTurnoverS = ptr(shareLatency.Seconds())
	return r, nil
}
