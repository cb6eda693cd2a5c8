package agent_test

import (
	"testing"

	"github.com/batchagent/batchagent/agent"
)

// BenchmarkSize is the per-turn cost of compaction when no window is near:
// one size estimate of a 60-turn conversation.
func BenchmarkSize(b *testing.B) {
	msgs := history(60)
	b.ReportAllocs()
	for b.Loop() {
		agent.Size(msgs)
	}
}

// BenchmarkCompact compacts a 60-turn conversation of 2 KB tool results
// to half its size.
func BenchmarkCompact(b *testing.B) {
	msgs := history(60)
	half := agent.Size(msgs) / 2
	b.ReportAllocs()
	for b.Loop() {
		agent.Compact(msgs, half, half)
	}
}
