package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlanIsDeterministic: the same waiting agents give the same packs,
// in input order, whatever order they arrived in; the size and the token
// budget cap each pack, and a pack always takes at least one agent.
func TestPlanIsDeterministic(t *testing.T) {
	items := func(order []int) []*packItem {
		var its []*packItem
		for seq, i := range order {
			its = append(its, &packItem{index: i, seq: uint64(seq), tokens: 10 + i%3})
		}
		return its
	}
	packs := func(pending []*packItem, size, budget int) [][]int {
		var out [][]int
		for len(pending) > 0 {
			var p []*packItem
			p, pending = plan(pending, size, budget)
			ids := make([]int, len(p))
			for i, it := range p {
				ids[i] = it.index
			}
			out = append(out, ids)
		}
		return out
	}
	order := make([]int, 23)
	for i := range order {
		order[i] = i
	}
	want := packs(items(order), 5, 1000)
	if len(want) != 5 || !slices.Equal(want[0], []int{0, 1, 2, 3, 4}) || !slices.Equal(want[4], []int{20, 21, 22}) {
		t.Fatalf("packs of 23 by 5 = %v", want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		shuffled := slices.Clone(order)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := packs(items(shuffled), 5, 1000); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("arrival order %v: packs %v, want %v", shuffled, got, want)
		}
	}
	// Tokens 10, 11, 12, 10, ...: a budget of 25 holds two tasks.
	if got := packs(items(order[:6]), 5, 25); !slices.EqualFunc(got, [][]int{{0, 1}, {2, 3}, {4, 5}}, slices.Equal) {
		t.Errorf("packs under a 25-token budget = %v", got)
	}
	// A task over the budget still goes, alone.
	if got := packs(items(order[:2]), 5, 5); !slices.EqualFunc(got, [][]int{{0}, {1}}, slices.Equal) {
		t.Errorf("packs under a 5-token budget = %v", got)
	}
}
