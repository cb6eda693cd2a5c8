package config_test

import (
	"testing"

	"github.com/batchagent/batchagent/internal/config"
)

// TestConcurrencySource checks the summary's source of the limit on model
// calls in flight: the file's limits.max_inflight, else the backend's
// default, else none.
func TestConcurrencySource(t *testing.T) {
	sim, err := config.OpenBackend(t.Context(), "sim://", "", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	vllm, err := config.OpenBackend(t.Context(), "vllm://127.0.0.1:1/v1", "m", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url      string
		inflight int
		want     string
	}{
		{"sim://", 5, "max 5: limits.max_inflight"},
		{"sim://", 0, "sim declares no limit; limits.max_inflight sets one"},
		{"vllm://127.0.0.1:1/v1", 0, "max 64: vllm default; limits.max_inflight sets it"},
	} {
		m := sim
		if c.url != "sim://" {
			m = vllm
		}
		if got := config.ConcurrencySource(c.url, m, c.inflight); got != c.want {
			t.Errorf("ConcurrencySource(%q, %d) = %q, want %q", c.url, c.inflight, got, c.want)
		}
	}
}
