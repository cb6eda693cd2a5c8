package engine

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
)

// Automatic packing (job.Pack.Auto). The packer of an automatic job
// starts unpacked: it hands its waiting agents to run alone, no more at
// once than twice its backend's admission limit, so that agents stay in
// pending for packs should packing pay. Meanwhile it sends a probe: one
// pack of autoProbe agents. It then compares what a task costs each way:
// alone, the call time of the agent's answer; packed, the pack's call
// time divided by its agents. A call's time holds what the backend
// spends on it, the prefill a prefix cache spares or not, and its wait
// in the server's queue. Packing starts when a packed task costs less
// than autoGain of an alone one, or when requests bind: the backend's
// admission has a requests-per-minute budget (configured or learnt from
// rate-limit headers) that the alone calls come near, or it throttled
// (429s). Packs then double while the time per task falls (or, requests
// binding, while calls stay within the latency budget), fall back to the
// best size measured when a larger one costs more, and go back to
// unpacked when packed tasks stop being cheaper. A pack slower than the
// latency budget (job.DefaultPackLatencyBudget, or a quarter of the
// job's timeout when shorter) caps packs at half its size. Unpacked, a
// probe goes out again after autoProbeEvery alone answers, that number
// doubling after each probe that finds packing does not pay, so that a
// slot-bound server with a prefix cache loses a handful of probe packs
// to the search and no more.
const (
	autoProbe      = 4    // the agents of a probe pack
	autoProbeEvery = 64   // alone answers before the next probe; doubles
	autoGain       = 0.7  // a packed task must cost less than this share of an alone one
	autoMinAlone   = 3    // alone answers measured before a decision
	autoEWMA       = 0.3  // weight of the newest measure
	autoRateNear   = 0.8  // share of the RPM budget at which requests bind
	autoGrowGain   = 0.95 // a larger pack must cost less than this share of the smaller
)

// autoState is what an automatic packer measured and decided; under the
// packer's mu.
type autoState struct {
	budget     time.Duration   // the latency budget of one pack
	cap        int             // the largest pack allowed: latency and agreement lower it
	alone      float64         // EWMA of an alone task's call seconds, its queue wait taken out
	ttft0      time.Duration   // the shortest time to first token of an alone call: one without a wait in the server's queue
	aloneN     int             // alone answers measured
	aloneOut   int             // agents handed to run alone, not yet answered
	cost       map[int]float64 // EWMA of a packed task's call seconds, by pack size
	costN      map[int]int     // packs measured, by size
	probing    bool            // a probe pack is out
	nextProbe  int             // aloneN at which the next probe goes out
	probeEvery int
	started    time.Time // of the first alone answer measured, for the request rate
	throttles  int64     // the gate's throttles when the packer started
	bound      bool      // requests were seen to bind (rateBound)
	sizes      []int     // the sizes chosen, in order, for the log and tests
	// verify: the latest checks (true: agreed), a ring of
	// job.PackAgreementWindow.
	checks  []bool
	checkAt int
}

// newAuto sets up the state of a packer of a job whose timeout is
// timeout: automatic (p.autoOn), it starts unpacked.
func (p *packer) newAuto(timeout time.Duration) {
	a := &autoState{budget: job.DefaultPackLatencyBudget, cap: p.maxAgents,
		cost: map[int]float64{}, costN: map[int]int{}, probeEvery: autoProbeEvery}
	if timeout > 0 && timeout/4 < a.budget {
		a.budget = timeout / 4
	}
	if p.g.gated {
		a.throttles = p.g.g.Stats().Throttles
	}
	p.auto = a
	if p.autoOn {
		p.size = 1
	}
}

// setSize sets the pack size, noting the change; p.mu held.
func (p *packer) setSize(n int, why string) {
	if n == p.size {
		return
	}
	p.size = n
	p.auto.sizes = append(p.auto.sizes, n)
	p.e.log.Info("pack size changed", "size", n, "auto", p.autoOn, "why", why)
}

// aloneLimit is how many agents an unpacked automatic packer hands to run
// alone at once: twice the backend's admission limit.
func (p *packer) aloneLimit() int {
	if p.g.gated {
		if l := p.g.g.Stats().Limit; l > 0 {
			return 2 * l
		}
	}
	return 4 * p.maxAgents
}

// unpacked takes, from the waiting agents of an unpacked automatic packer,
// those to run alone now, and the probe pack to send when one is due;
// p.mu held.
func (p *packer) unpacked() (alone, probe []*packItem) {
	a := p.auto
	// A probe is a full one: a pack of 2 pays its call's fixed cost over
	// too few tasks to show what packing gains.
	if p.autoOn && !a.probing && a.aloneN >= a.nextProbe && len(p.pending) >= min(autoProbe, a.cap) && a.cap >= 2 {
		probe, p.pending = plan(p.pending, min(autoProbe, a.cap), p.maxTokens-p.sysTokens)
		if len(probe) >= 2 {
			a.probing = true
		} else {
			p.pending = append(p.pending, probe...)
			probe = nil
		}
	}
	// plan takes at least one agent: with no room to hand one on, take
	// none, or the agent would be taken from pending and never answered.
	if n := min(len(p.pending), p.aloneLimit()-a.aloneOut); n > 0 {
		alone, p.pending = plan(p.pending, n, 1<<62)
	}
	a.aloneOut += len(alone)
	return alone, probe
}

// serviceTime is what a call that took took, its first token after
// ttft, cost the server: the time less its wait in the server's queue,
// taken as ttft beyond the shortest time to first token of an alone call
// (a.ttft0). The queue is left out because it says how many calls wait,
// not what one costs: a continuous-batching server that the engine's
// admission fills beyond its slots makes every call wait longer, alone or
// packed, and a pack's wait is shared by its tasks, which would make
// packing look cheaper than it is. Zero ttft (not measured) leaves took.
// A pack's prefill of its extra tasks is taken as part of its wait, a
// small error for the short tasks packing suits; p.mu held.
func (a *autoState) serviceTime(took, ttft time.Duration) time.Duration {
	if ttft <= 0 || a.ttft0 <= 0 || ttft <= a.ttft0 {
		return took
	}
	return max(took-(ttft-a.ttft0), time.Millisecond)
}

// aloneDone measures an agent handed to run alone by an automatic packer,
// whose call time was spent (zero: it failed, nothing learnt), its first
// token after ttft.
func (p *packer) aloneDone(spent, ttft time.Duration) {
	p.mu.Lock()
	a := p.auto
	a.aloneOut--
	if spent > 0 {
		if ttft > 0 && (a.ttft0 == 0 || ttft < a.ttft0) {
			a.ttft0 = ttft
		}
		c := a.serviceTime(spent, ttft).Seconds()
		if a.aloneN == 0 {
			a.started = time.Now()
			a.alone = c
		} else {
			a.alone += autoEWMA * (c - a.alone)
		}
		a.aloneN++
	}
	if p.autoOn {
		p.decide()
	}
	wake := len(p.pending) > 0
	p.mu.Unlock()
	if wake {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// rateBound reports whether requests bind: the admission's RPM budget
// is near what the alone calls make, or the backend throttled since the
// packer started. Once seen it stays so: packing lowers the request rate
// it is seen by, and an account's limit does not go away; p.mu held.
func (p *packer) rateBound() bool {
	a := p.auto
	if a.bound || !p.g.gated {
		return a.bound
	}
	st := p.g.g.Stats()
	if st.Throttles > a.throttles {
		a.bound = true
		return true
	}
	if st.RPM <= 0 || a.aloneN < autoMinAlone {
		return false
	}
	mins := time.Since(a.started).Minutes()
	a.bound = mins > 0 && float64(a.aloneN)/mins >= autoRateNear*float64(st.RPM)
	return a.bound
}

// packDone measures a pack of n agents whose call took took, its first
// token after ttft (zero: none came); failed says whether the call failed
// or its answer was cut at the token cap or mostly unusable; p.mu held.
func (p *packer) packDone(n int, took, ttft time.Duration, failed bool) {
	a := p.auto
	if p.size == 1 {
		a.probing = false
	}
	if failed || n < 2 {
		return
	}
	c := a.serviceTime(took, ttft).Seconds() / float64(n)
	if a.costN[n] == 0 {
		a.cost[n] = c
	} else {
		a.cost[n] += autoEWMA * (c - a.cost[n])
	}
	a.costN[n]++
	if took > a.budget && n >= 2 {
		a.cap = max(1, n/2)
		if p.size > a.cap {
			p.setSize(a.cap, "a pack took longer than the latency budget "+a.budget.String())
		}
	}
	p.decide()
}

// decide sets the pack size from what was measured; p.mu held.
func (p *packer) decide() {
	a := p.auto
	if a.aloneN < autoMinAlone {
		return
	}
	bound := p.rateBound()
	s := p.size
	if s == 1 {
		best, bestCost := 0, 0.0
		for n, c := range a.cost {
			if a.costN[n] > 0 && n <= a.cap && (best == 0 || c < bestCost) {
				best, bestCost = n, c
			}
		}
		switch {
		case best >= 2 && (bound || bestCost < autoGain*a.alone):
			p.setSize(best, "a packed task costs less than one alone, or requests bind")
		case best >= 2 && !a.probing && a.nextProbe <= a.aloneN:
			a.nextProbe = a.aloneN + a.probeEvery
			a.probeEvery *= 2
		}
		return
	}
	if a.costN[s] == 0 {
		return
	}
	if !bound && a.cost[s] >= autoGain*a.alone/autoGrowGain {
		a.nextProbe = a.aloneN + a.probeEvery
		p.setSize(1, "packed tasks no longer cost less than alone ones")
		return
	}
	next := min(2*s, a.cap, p.maxAgents)
	prev := s / 2
	switch {
	case next > s && (a.costN[next] == 0 || a.cost[next] < autoGrowGain*a.cost[s] || bound):
		p.setSize(next, "the time per task fell")
	case prev >= 2 && a.costN[prev] > 0 && a.cost[prev] < autoGrowGain*a.cost[s] && !bound:
		p.setSize(prev, "a smaller pack costs less per task")
	}
}

// checked records a verified packed answer: whether it agreed with the
// answer its task got alone. Below the job's MinAgreement over the
// window, packs are halved.
func (p *packer) checked(agreed bool) {
	p.e.stats.packVerified.Add(1)
	if agreed {
		p.e.stats.packAgreed.Add(1)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.auto
	if len(a.checks) < job.PackAgreementWindow {
		a.checks = append(a.checks, agreed)
	} else {
		a.checks[a.checkAt] = agreed
		a.checkAt = (a.checkAt + 1) % job.PackAgreementWindow
	}
	ok := 0
	for _, c := range a.checks {
		if c {
			ok++
		}
	}
	const minChecks = 5
	rate := float64(ok) / float64(len(a.checks))
	if len(a.checks) < minChecks || rate >= p.minAgree {
		return
	}
	to := max(1, p.size/2)
	p.maxAgents = max(1, to)
	if a.cap > to {
		a.cap = to
	}
	p.e.log.Warn("packed answers disagree with their tasks' answers alone: packing backs off",
		"agreement", rate, "checks", len(a.checks), "min_agreement", p.minAgree, "size", to)
	p.setSize(to, "packed answers disagree")
	a.checks, a.checkAt = a.checks[:0], 0
}

// sample reports whether the next packed answer is to be checked: one in
// every 1/Verify, spread evenly; p.mu held.
func (p *packer) sample() bool {
	if p.verify <= 0 {
		return false
	}
	p.verifyAcc += p.verify
	if p.verifyAcc >= 1 {
		p.verifyAcc--
		return true
	}
	return false
}

// agree reports whether two answers are the same JSON value (object
// members in any order, numbers and strings as JSON reads them).
func agree(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	cx, _ := json.Marshal(x)
	cy, _ := json.Marshal(y)
	return bytes.Equal(cx, cy)
}

// afterAlone returns what an agent that a packer sends to run alone does
// once its run ends: an automatic packer measures its call time, and a
// checked packed answer (packed, non-nil) is compared with the alone one;
// nil when there is nothing to do.
func (p *packer) afterAlone(st *agent.State, measured bool, packed json.RawMessage) func(*agent.State, error) {
	if !measured && packed == nil {
		return nil
	}
	inf, hadTTFT := st.Timings.Inference, st.Timings.TTFT > 0
	return func(st *agent.State, err error) {
		if measured {
			var spent, ttft time.Duration
			if err == nil {
				spent = st.Timings.Inference - inf
				if !hadTTFT {
					ttft = st.Timings.TTFT
				}
			}
			p.aloneDone(spent, ttft)
		}
		if packed != nil && err == nil && st.Output != nil {
			p.checked(agree(packed, st.Output))
		}
	}
}
