package checkpoint_test

import (
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/checkpoint/checkpointtest"
)

// The store saves final states asynchronously, as the engine discovers by
// type assertion: the suite's save_async case must not be skipped.
var _ checkpointtest.AsyncSaver = (*checkpoint.Store)(nil)

// TestConformance runs the Checkpointer suite against the SQLite store in
// a temporary directory: with its defaults, and with one state per
// transaction and no waiting for more (every Save its own commit).
func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  checkpoint.Config
	}{
		{"default", checkpoint.Config{}},
		{"one_per_commit", checkpoint.Config{MaxBatch: 1, FlushInterval: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkpointtest.Run(t, func(t *testing.T) batchagent.Checkpointer {
				s, _ := open(t, tt.cfg)
				return s
			})
		})
	}
}
