package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/batchagent/batchagent"
)

// TestReleasable: results failed by Redis (the shared budget unreachable,
// the checkpoint not loaded) or by the shutdown are released for another
// try; an agent's own failures are recorded.
func TestReleasable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&batchagent.AgentError{Op: "generate", Kind: batchagent.KindBackend, Err: fmt.Errorf("wait: %w", ErrSharedLimit)}, true},
		{&batchagent.AgentError{Op: "checkpoint", Kind: batchagent.KindBackend, Err: errors.New("load checkpoint: connection refused")}, true},
		{&batchagent.AgentError{Op: "generate", Kind: batchagent.KindCanceled, Err: context.Canceled}, true},
		{&batchagent.AgentError{Op: "generate", Kind: batchagent.KindBackend, Err: errors.New("server error")}, false},
		{&batchagent.AgentError{Op: "validate", Kind: batchagent.KindValidation, Err: errors.New("bad output")}, false},
	} {
		if got := releasable(tc.err); got != tc.want {
			t.Errorf("releasable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
