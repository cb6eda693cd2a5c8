// Command npc-planner runs a 60 Hz game loop over 500 characters, each
// asking a model for a plan (a list of steps) through Engine.Submit, and
// polling the handles with Try every frame: the loop never waits on the
// model. Each agent has a 2 s budget; a smaller model, then the game's
// rule-based planner answer when the primary is slow or dead. With -die
// the primary backend dies mid-run: its circuit breaker opens and the
// characters still asking get their plans from the fallbacks at once.
//
// It runs on the in-process simulator:
//
//	go run ./examples/npc-planner
//	go run ./examples/npc-planner -die 1s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

const planSchema = `{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":4}},"required":["steps"],"additionalProperties":false}`

// dying is a model that answers through m until it dies, then fails every
// call with a connection error, as a crashed server would.
type dying struct {
	m    llm.Model
	dead *atomic.Bool
}

func (d dying) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if d.dead.Load() {
		return nil, fmt.Errorf("primary: %w", llm.ErrConnection)
	}
	return d.m.Generate(ctx, req)
}

// heuristic is the game's rule-based planner: the last tier.
func heuristic(_ context.Context, in batchagent.Input) (json.RawMessage, error) {
	step := "patrol"
	if hp, _ := in["hp"].(int); hp < 30 {
		step = "flee to " + fmt.Sprint(in["home"])
	}
	return json.Marshal(map[string][]string{"steps": {step}})
}

func main() {
	n := flag.Int("n", 500, "characters")
	budget := flag.Duration("budget", 2*time.Second, "each plan's time budget")
	die := flag.Duration("die", 0, "kill the primary backend this long into the run (0: never)")
	asJSON := flag.Bool("json", false, "print the summary as JSON")
	flag.Parse()
	if err := run(*n, *budget, *die, *asJSON); err != nil {
		log.Fatal(err)
	}
}

func run(n int, budget, die time.Duration, asJSON bool) error {
	ctx := context.Background()
	primary, err := sim.New(sim.Config{Latency: 1200 * time.Millisecond, PerToken: time.Millisecond, Jitter: 0.8, Seed: 1})
	if err != nil {
		return err
	}
	small, err := sim.New(sim.Config{Latency: 50 * time.Millisecond, Seed: 2})
	if err != nil {
		return err
	}
	var dead atomic.Bool
	e, err := batchagent.New(batchagent.Config{Breaker: batchagent.Breaker{Failures: 5, Cooldown: 5 * time.Second}})
	if err != nil {
		return err
	}
	defer func() { _ = e.Shutdown(ctx) }()
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID:           "npc-plan",
		Model:        dying{m: primary, dead: &dead},
		System:       "You plan the next moves of a game character.",
		Task:         "Character {name} at {x},{y} with {hp} hp, home {home}. Plan up to 4 steps.",
		OutputSchema: json.RawMessage(planSchema),
		Priority:     batchagent.Interactive,
		Budget:       budget,
		Fallbacks:    []batchagent.Fallback{{Model: small}, {Func: heuristic}},
	})
	if err != nil {
		return err
	}
	handles := make([]*batchagent.Handle, n)
	plans := 0
	tiers := map[int]int{}
	var frames []time.Duration
	tick := time.NewTicker(time.Second / 60)
	defer tick.Stop()
	start := time.Now()
	next := 0
	for plans < n {
		<-tick.C
		if die > 0 && !dead.Load() && time.Since(start) >= die {
			dead.Store(true)
		}
		f := time.Now()
		// Each frame, up to 10 more characters ask for a plan.
		for end := min(next+10, n); next < end; next++ {
			handles[next] = e.Submit(ctx, spec, batchagent.Input{
				"name": fmt.Sprintf("npc-%d", next), "x": next % 100, "y": next / 100, "hp": next % 100, "home": "camp",
			})
		}
		for i, h := range handles[:next] {
			if h == nil {
				continue
			}
			if r, ok := h.Try(); ok {
				handles[i] = nil
				plans++
				if r.Err != nil {
					tiers[-1]++
				} else {
					tiers[r.Tier]++
				}
			}
		}
		frames = append(frames, time.Since(f))
	}
	slices.Sort(frames)
	pct := func(p float64) float64 {
		return float64(frames[int(p*float64(len(frames)-1))].Microseconds()) / 1000
	}
	s := e.Stats()
	sum := map[string]any{
		"characters": n, "frames": len(frames), "wall_s": time.Since(start).Seconds(),
		"frame_p50_ms": pct(0.5), "frame_p99_ms": pct(0.99), "tier_counts": tiers,
		"failed": tiers[-1], "breaker_changes": s.BreakerChanges, "primary_died": die > 0,
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(sum)
	}
	fmt.Printf("%d plans in %d frames (%.1fs): frame p50 %.3f ms, p99 %.3f ms; by tier %v; breaker changes %d\n",
		n, len(frames), sum["wall_s"], sum["frame_p50_ms"], sum["frame_p99_ms"], tiers, s.BreakerChanges)
	return nil
}
