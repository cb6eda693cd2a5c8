package batchagent_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/schema"
)

// autoSchema is the answer of the automatic packing tests: a sentiment
// label, as `batchagent bench pack` asks for.
const autoSchema = `{"type":"object","properties":{"label":{"type":"string","enum":["positive","negative","neutral"]}},"required":["label"],"additionalProperties":false}`

// profileServer serves the simulator's named profile, adjusted by adjust,
// over HTTP until the test ends, and returns it with an OpenAI backend of it.
func profileServer(t *testing.T, profile string, adjust func(*simhttp.Config)) (*simhttp.Server, *openai.Model) {
	t.Helper()
	cfg, err := simhttp.Profile(profile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = sim.Config{ToolTurns: -1, Seed: 5}
	cfg.MaxQueue = -1
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := simhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); cancel(); wg.Wait() })
	m, err := openai.New(openai.Config{BaseURL: hs.URL + "/v1", Flavor: openai.FlavorSim})
	if err != nil {
		t.Fatal(err)
	}
	return srv, m
}

// runAuto runs n classification tasks packed automatically (up to 20 a
// call) against m, checks that each input ends with one result valid
// against autoSchema, and returns the engine's stats.
func runAuto(t *testing.T, m *openai.Model, n int, pk batchagent.Pack) batchagent.Stats {
	t.Helper()
	pk.MaxAgents, pk.Auto = 20, true
	d := batchagent.Def{
		Model:        m,
		System:       "You classify the sentiment of short product reviews. Label each positive, negative or neutral.",
		Task:         "Classify review {id}: the kettle boils fast but the lid rattles",
		OutputSchema: json.RawMessage(autoSchema),
		MaxTokens:    1024,
		MaxRetries:   5,
		Pack:         pk,
	}
	sch, err := schema.Compile(json.RawMessage(autoSchema))
	if err != nil {
		t.Fatal(err)
	}
	e, res := runWith(t, batchagent.Config{MaxActive: n, Admission: batchagent.Admission{WarmPrefix: true}}, d, batchagent.Slice(inputs(n)))
	if len(res) != n {
		t.Fatalf("%d results, want %d", len(res), n)
	}
	for i, r := range res {
		if r.Index != i || r.Err != nil || sch.Validate(r.Output) != nil {
			t.Fatalf("result %d: index %d, err %v, output %s; want a valid answer", i, r.Index, r.Err, r.Output)
		}
	}
	return e.Stats()
}

// packedShare is the share of the tasks the server received in requests
// of at least k tasks.
func packedShare(sizes map[int]int64, k int) float64 {
	var all, in int64
	for size, reqs := range sizes {
		all += int64(size) * reqs
		if size >= k {
			in += int64(size) * reqs
		}
	}
	if all == 0 {
		return 0
	}
	return float64(in) / float64(all)
}

// TestPackAutoStaysAloneOnCachedSlots: on a slot-bound server with a
// prefix cache and free slots, a packed task costs about what one alone
// does, so automatic packing sends almost every task alone; its probe
// packs are all it packs.
func TestPackAutoStaysAloneOnCachedSlots(t *testing.T) {
	// The profile's own timings: scaled down, the client's cost of a call
	// (HTTP, and the race detector's) would outweigh the server's, and
	// packing would rightly pay.
	srv, m := profileServer(t, simhttp.ProfileCachedSlots, nil)
	runAuto(t, m, 400, batchagent.Pack{})
	sizes := srv.PackSizes()
	if alone := 1 - packedShare(sizes, 2); alone < 0.9 {
		t.Errorf("server received packs %v: %.0f%% of tasks alone, want ≥ 90%%", sizes, 100*alone)
	}
}

// TestPackAutoPacksOnOneSlot: on a server with one sequence, no prefix
// cache and a per-call overhead, packing spares the overhead and the
// prompt's prefill for every task but one in a pack: most tasks go in
// packs of 4 or more.
func TestPackAutoPacksOnOneSlot(t *testing.T) {
	srv, m := profileServer(t, simhttp.ProfileOneSlot, func(c *simhttp.Config) {
		c.CallOverhead = simhttp.OneSlotCallOverhead / 4
		c.PrefillPerToken, c.DecodeStep = simhttp.DefaultPrefillPerToken/4, simhttp.DefaultDecodeStep/4
	})
	st := runAuto(t, m, 200, batchagent.Pack{})
	sizes := srv.PackSizes()
	if share := packedShare(sizes, 4); share < 0.6 {
		t.Errorf("server received packs %v: %.0f%% of tasks in packs of 4 or more, want most", sizes, 100*share)
	}
	if st.Packed < 100 {
		t.Errorf("stats: %d packed of 200, want most", st.Packed)
	}
}

// TestPackAutoPacksWhenRequestsBind: on a hosted API whose requests per
// minute bind (learnt from its rate-limit headers), automatic packing
// packs, though each call is as fast alone.
func TestPackAutoPacksWhenRequestsBind(t *testing.T) {
	srv, m := profileServer(t, simhttp.ProfileRPMLimited, func(c *simhttp.Config) {
		c.RPM = 1200 // 20 requests a second
		c.PrefillPerToken, c.DecodeStep, c.DecodeStepPerSeq = simhttp.DefaultPrefillPerToken/4, simhttp.DefaultDecodeStep/4, simhttp.DefaultDecodeStepPerSeq/4
	})
	start := time.Now()
	runAuto(t, m, 300, batchagent.Pack{})
	sizes := srv.PackSizes()
	if share := packedShare(sizes, 4); share < 0.5 {
		t.Errorf("server received packs %v: %.0f%% of tasks in packs of 4 or more, want most", sizes, 100*share)
	}
	t.Logf("300 tasks in %v, %d requests, packs %v", time.Since(start).Round(time.Millisecond), srv.Stats().Requests, sizes)
}

// TestPackAutoVerifyBacksOffOnBias: with answers wrong more often the
// later a task sits in a pack, checked answers disagree, the agreement is
// reported below 1, packing backs off to smaller packs, and every input
// still ends with a valid answer.
func TestPackAutoVerifyBacksOffOnBias(t *testing.T) {
	srv, m := profileServer(t, simhttp.ProfileOneSlot, func(c *simhttp.Config) {
		c.CallOverhead = simhttp.OneSlotCallOverhead / 4
		c.PrefillPerToken, c.DecodeStep = simhttp.DefaultPrefillPerToken/4, simhttp.DefaultDecodeStep/4
		c.Model.PositionBias = 0.3
	})
	st := runAuto(t, m, 200, batchagent.Pack{Verify: 0.25, MinAgreement: 0.95})
	if st.PackVerified < 5 || st.PackAgreed >= st.PackVerified {
		t.Fatalf("stats: %d of %d checked answers agreed; want some checked, fewer agreeing", st.PackAgreed, st.PackVerified)
	}
	sizes := srv.PackSizes()
	big := 0
	for k := range sizes {
		big = max(big, k)
	}
	// Backing off halves the packs: the largest pack sent is at least
	// twice what the run ended with, so tasks went in smaller packs (or
	// alone) than at the peak.
	if sizes[1] == 0 || big < 4 {
		t.Errorf("server received packs %v; want packs, then tasks alone or in smaller packs after the disagreement", sizes)
	}
	t.Logf("agreement %d/%d, packs %v", st.PackAgreed, st.PackVerified, sizes)
}

// TestPackAutoVerifyAgreesWithoutBias: without position bias every
// checked packed answer is the task's answer alone: agreement is 1.
func TestPackAutoVerifyAgreesWithoutBias(t *testing.T) {
	_, m := profileServer(t, simhttp.ProfileOneSlot, func(c *simhttp.Config) {
		c.CallOverhead = simhttp.OneSlotCallOverhead / 4
		c.PrefillPerToken, c.DecodeStep = simhttp.DefaultPrefillPerToken/4, simhttp.DefaultDecodeStep/4
	})
	st := runAuto(t, m, 120, batchagent.Pack{Verify: 0.25})
	if st.PackVerified == 0 || st.PackAgreed != st.PackVerified {
		t.Errorf("stats: %d of %d checked answers agreed; want every one, and some checked", st.PackAgreed, st.PackVerified)
	}
}
