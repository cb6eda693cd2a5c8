package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// DefaultNPCN is the npc scenario's number of characters.
const DefaultNPCN = 500

// NPCOptions configures the npc scenario.
type NPCOptions struct {
	// N is the number of characters. Defaults to DefaultNPCN.
	N int
	// Budget is each plan's time budget. Defaults to 2s.
	Budget time.Duration
	// JSON prints one JSON object per mode instead of a line.
	JSON bool
}

// NPCReport is one mode of the npc scenario: the game loop's frame times
// while the plans are in flight, and who answered them.
type NPCReport struct {
	Scenario string `json:"scenario"`
	// Mode is "healthy", or "primary_dies" (the primary backend fails
	// every call once half the characters asked for their plan).
	Mode       string  `json:"mode"`
	N          int     `json:"n"`
	WallS      float64 `json:"wall_s"`
	Frames     int     `json:"frames"`
	FrameP50MS float64 `json:"frame_p50_ms"`
	FrameP99MS float64 `json:"frame_p99_ms"`
	// TierCounts counts plans by the tier that answered: "0" the primary,
	// "1" the smaller model, "2" the heuristic.
	TierCounts     map[string]int `json:"tier_counts"`
	Failed         int            `json:"failed"`
	BreakerChanges int64          `json:"breaker_changes"`
}

// npcDying answers through m until dead is set, then fails every call
// with a connection error.
type npcDying struct {
	m    llm.Model
	dead *atomic.Bool
}

func (d npcDying) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if d.dead.Load() {
		return nil, fmt.Errorf("npc primary: %w", llm.ErrConnection)
	}
	return d.m.Generate(ctx, req)
}

// RunNPC runs the npc scenario (examples/npc-planner's loop): a 60 Hz
// loop submits N plans with Engine.Submit, 10 a frame, and polls their
// handles with Try every frame; the frame time is the loop's own work.
// It runs twice: with a healthy primary, and with a primary that dies.
func RunNPC(ctx context.Context, opt NPCOptions, w io.Writer) ([]NPCReport, error) {
	if opt.N < 0 || opt.Budget < 0 {
		return nil, errors.New("bench: -n must be positive")
	}
	if opt.N == 0 {
		opt.N = DefaultNPCN
	}
	if opt.Budget == 0 {
		opt.Budget = 2 * time.Second
	}
	var reports []NPCReport
	for _, mode := range []string{"healthy", "primary_dies"} {
		r, err := npcRun(ctx, opt, mode)
		if err != nil {
			return reports, err
		}
		reports = append(reports, r)
		if opt.JSON {
			out, _ := json.Marshal(r)
			fmt.Fprintln(w, string(out))
		} else {
			fmt.Fprintf(w, "npc  %-12s n=%d  wall %.2fs  frames %d  frame p50 %.3f ms  p99 %.3f ms  tiers %v  failed %d  breaker changes %d\n",
				r.Mode, r.N, r.WallS, r.Frames, r.FrameP50MS, r.FrameP99MS, r.TierCounts, r.Failed, r.BreakerChanges)
		}
	}
	return reports, nil
}

func npcRun(ctx context.Context, opt NPCOptions, mode string) (NPCReport, error) {
	primary, err := sim.New(sim.Config{Latency: 1200 * time.Millisecond, PerToken: time.Millisecond, Jitter: 0.8, Seed: 1})
	if err != nil {
		return NPCReport{}, err
	}
	small, err := sim.New(sim.Config{Latency: 50 * time.Millisecond, Seed: 2})
	if err != nil {
		return NPCReport{}, err
	}
	var dead atomic.Bool
	e, err := batchagent.New(batchagent.Config{Breaker: batchagent.Breaker{Failures: 5, Cooldown: 5 * time.Second}})
	if err != nil {
		return NPCReport{}, err
	}
	defer func() { _ = e.Shutdown(ctx) }()
	heuristic := func(_ context.Context, in batchagent.Input) (json.RawMessage, error) {
		return json.RawMessage(`{"steps":["patrol"]}`), nil
	}
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID:           "npc-plan",
		Model:        npcDying{m: primary, dead: &dead},
		System:       "You plan the next moves of a game character.",
		Task:         "Character {name} at {x},{y}. Plan up to 4 steps.",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":4}},"required":["steps"],"additionalProperties":false}`),
		Priority:     batchagent.Interactive,
		Budget:       opt.Budget,
		Fallbacks:    []batchagent.Fallback{{Model: small}, {Func: heuristic}},
	})
	if err != nil {
		return NPCReport{}, err
	}
	n := opt.N
	handles := make([]*batchagent.Handle, n)
	tiers := map[string]int{}
	failed, plans, next := 0, 0, 0
	var frames []time.Duration
	tick := time.NewTicker(time.Second / 60)
	defer tick.Stop()
	start := time.Now()
	for plans < n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return NPCReport{}, ctx.Err()
		}
		if mode == "primary_dies" && next >= n/2 {
			dead.Store(true)
		}
		f := time.Now()
		for end := min(next+10, n); next < end; next++ {
			handles[next] = e.Submit(ctx, spec, batchagent.Input{"name": "npc-" + strconv.Itoa(next), "x": next % 100, "y": next / 100})
		}
		for i, h := range handles[:next] {
			if h == nil {
				continue
			}
			if r, ok := h.Try(); ok {
				handles[i] = nil
				plans++
				if r.Err != nil {
					failed++
				} else {
					tiers[strconv.Itoa(r.Tier)]++
				}
			}
		}
		frames = append(frames, time.Since(f))
	}
	wall := time.Since(start)
	slices.Sort(frames)
	pct := func(p float64) float64 {
		return round(float64(frames[int(p*float64(len(frames)-1))].Nanoseconds())/1e6, 3)
	}
	return NPCReport{
		Scenario: "npc", Mode: mode, N: n, WallS: round(wall.Seconds(), 3), Frames: len(frames),
		FrameP50MS: pct(0.5), FrameP99MS: pct(0.99), TierCounts: tiers, Failed: failed,
		BreakerChanges: e.Stats().BreakerChanges,
	}, nil
}
