package mcptool_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// TestBatch runs a batch whose agents call the echo tool of one MCP server
// process through the engine's tool pool.
func TestBatch(t *testing.T) {
	const n = 50
	tests := []struct {
		name      string
		task      string // {id} is the input's index
		cacheable bool
		want      tool.Stats // Name, Requested, Executed, Coalesced + CacheHits (in CacheHits)
		texts     int        // distinct texts the server echoes
	}{
		// Distinct arguments: every call reaches the server.
		{name: "distinct", task: "Echo text: hello{id}", want: tool.Stats{Name: "echo", Requested: n, Executed: n}, texts: n},
		// Identical arguments of a cacheable tool: one execution, the rest
		// coalesced into it or answered from the cache.
		{name: "identical cacheable", task: "Echo text: same", cacheable: true,
			want: tool.Stats{Name: "echo", Requested: n, Executed: 1, CacheHits: n - 1}, texts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := stdioConfig("1")
			cfg.Cacheable = tt.cacheable
			c := connect(t, cfg)
			model, err := sim.New(sim.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			echo := byName(t, c, "echo")
			spec, err := batchagent.NewSpec(batchagent.Def{
				ID:    "mcp",
				Model: model,
				Task:  tt.task,
				Tools: []tool.Tool{echo},
			})
			if err != nil {
				t.Fatalf("NewSpec() = %v", err)
			}
			eng, err := batchagent.New(batchagent.Config{})
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			inputs := make([]batchagent.Input, n)
			for i := range inputs {
				inputs[i] = batchagent.Input{"id": i}
			}
			results, err := eng.Run(t.Context(), spec, batchagent.Slice(inputs))
			if err != nil {
				t.Fatalf("Run() = %v", err)
			}
			for _, r := range results {
				if !r.OK() || r.ToolCalls != 1 {
					t.Errorf("result %d: err %v, %d tool calls, want OK with 1 tool call", r.Index, r.Err, r.ToolCalls)
				}
			}
			st := eng.Stats()
			if len(st.Tools) != 1 {
				t.Fatalf("Stats().Tools = %+v, want the echo tool only", st.Tools)
			}
			got := tool.Stats{Name: st.Tools[0].Name, Requested: st.Tools[0].Requested, Executed: st.Tools[0].Executed,
				CacheHits: st.Tools[0].Coalesced + st.Tools[0].CacheHits}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("echo stats (-want +got):\n%s", diff)
			}
			if got, want := stats(t, c), (serverStats{Echoes: int(tt.want.Executed), Texts: tt.texts}); got != want {
				t.Errorf("server stats = %+v, want %+v", got, want)
			}
		})
	}
}
