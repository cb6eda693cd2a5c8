package respcache

import (
	"context"
	"sync"

	"github.com/batchagent/batchagent/llm"
)

// A Tally counts the cached answers of the calls made under a context
// (one agent's, say): set it with [WithTally]. The zero value is ready to
// use; it is safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	calls int
	saved llm.Usage
}

type tallyKey struct{}

// WithTally returns ctx with t counting the cached answers of the calls
// made under it.
func WithTally(ctx context.Context, t *Tally) context.Context {
	return context.WithValue(ctx, tallyKey{}, t)
}

func tallyOf(ctx context.Context) *Tally {
	t, _ := ctx.Value(tallyKey{}).(*Tally)
	return t
}

func (t *Tally) add(saved llm.Usage) {
	t.mu.Lock()
	t.calls++
	t.saved = t.saved.Add(saved)
	t.mu.Unlock()
}

// Counts returns the number of calls answered from the cache and the
// tokens their answers had cost.
func (t *Tally) Counts() (calls int, saved llm.Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls, t.saved
}
