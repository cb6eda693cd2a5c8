package telemetry_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/respcache"
)

// TestMetricsCountCachedCalls: a job run twice through a response cache
// answers the second run's calls from it: Engine.Stats and the
// batchagent_cached_calls_total and cache_saved_tokens_total counters
// say how many, and the tokens saved.
func TestMetricsCountCachedCalls(t *testing.T) {
	cache, err := respcache.Open(respcache.Config{Path: filepath.Join(t.TempDir(), "r.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	engine, err := batchagent.New(batchagent.Config{ResponseCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	if err := m.Watch(engine); err != nil {
		t.Fatal(err)
	}
	model, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "cached", Model: cache.Wrap(model), Task: "plan {who}"})
	if err != nil {
		t.Fatal(err)
	}
	inputs := []batchagent.Input{{"who": "a"}, {"who": "b"}, {"who": "c"}}
	var calls int64
	for run := range 2 {
		results, err := engine.Run(t.Context(), spec, batchagent.Slice(inputs))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("run %d, result %d: %v", run, r.Index, r.Err)
			}
			if run == 0 {
				calls += int64(r.ModelCalls)
			}
		}
	}
	st := engine.Stats()
	if st.CachedCalls != calls || st.SavedUsage.Total() <= 0 {
		t.Errorf("Stats: %d cached calls, %d tokens saved; want %d (the first run's calls), tokens saved", st.CachedCalls, st.SavedUsage.Total(), calls)
	}
	srv := httptest.NewServer(m.Exposition())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	if v, ok := value(fams, "batchagent_cached_calls_total", nil); !ok || v != float64(calls) {
		t.Errorf("cached_calls_total = %v (%t), want %d", v, ok, calls)
	}
	if v, ok := value(fams, "batchagent_cache_saved_tokens_total", nil); !ok || v != float64(st.SavedUsage.Total()) {
		t.Errorf("cache_saved_tokens_total = %v (%t), want %d", v, ok, st.SavedUsage.Total())
	}
}
