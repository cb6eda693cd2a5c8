package queue

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// ShareConfig says whose limits [Client.ShareLimits] shares.
type ShareConfig struct {
	// Addr is the address of the job's backend (its URL): workers that
	// call the same address and backend name share one limit.
	Addr string
	// Model is the job's own model: only calls to it share limits;
	// fallback tiers keep per-process limits.
	Model llm.Model
	// Visibility is the workers' visibility timeout: a dead worker's
	// slots come back no later than its tasks. Zero: [DefaultLeaseTTL].
	Visibility time.Duration
	// Logger receives the shared limits' warnings. Nil discards them.
	Logger *slog.Logger
	// Hosted says the backend is a hosted API that reports its account's
	// limits in its answers' headers (x-ratelimit-*,
	// anthropic-ratelimit-*): its calls share a learning budget
	// ([SharedRateConfig.Learn]) even with no rpm or tpm configured, so
	// that every worker paces from the limits any of them learnt.
	Hosted bool
	// Account names the account the backend's calls are billed to, for
	// example a hash of its API key (never the key itself): workers share
	// a budget only with those of the same account. "": one budget per
	// backend address.
	Account string
}

var _ sched.SharedSyncer = (*SharedRate)(nil)

// SharedLimits are the shared slot limits an engine made through
// [Client.ShareLimits] (one per backend, as it first calls it). Close them
// once the engine is shut down, so that their lease renewers stop.
type SharedLimits struct {
	mu    sync.Mutex // protects slots
	slots []*SharedSlots
}

func (l *SharedLimits) add(s *SharedSlots) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slots = append(l.slots, s)
}

// Close closes the slot limits; their leases still held lapse.
func (l *SharedLimits) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.slots {
		s.Close()
	}
	l.slots = nil
}

// ShareLimits makes the limits of cfg, an engine's configuration for a
// worker, one limit in Redis for every worker that calls the same backend
// address and model, rather than one per worker: rpm and tpm one budget
// ([SharedRate]), so that the account's limit stays one limit however
// many workers run (for a Hosted backend, also the limits its headers
// report: [SharedRate.Sync]), and max_inflight, when set, one adaptive limit on the
// calls in flight ([SharedSlots]), so that a server sized for N sequences
// gets at most N. Only sc.Model's calls share. It returns the slot limits
// the engine makes, for the caller to close after the engine.
func (c *Client) ShareLimits(cfg *batchagent.Config, sc ShareConfig) *SharedLimits {
	limits := &SharedLimits{}
	ttl := DefaultLeaseTTL
	if sc.Visibility > 0 {
		ttl = min(ttl, sc.Visibility)
	}
	if adm := cfg.Admission; adm.MaxInflight > 0 {
		cfg.Admission.SharedInflight = func(b batchagent.Backend) (sched.SharedSlots, error) {
			if b.Model != sc.Model {
				return nil, nil
			}
			sl, err := NewSharedSlots(c.rdb, c.Key("slots", sc.Addr, b.Name), SharedSlotsConfig{
				Max: adm.MaxInflight, LeaseTTL: ttl, Logger: sc.Logger})
			if err != nil {
				return nil, err // not a nil *SharedSlots in a non-nil interface
			}
			limits.add(sl)
			return sl, nil
		}
	}
	rl := cfg.Admission.RateLimit
	if rl.RPM <= 0 && rl.TPM <= 0 && !sc.Hosted {
		return limits
	}
	key := []string{"rate", sc.Addr}
	if sc.Account != "" {
		key = append(key, sc.Account)
	}
	cfg.Admission.RateLimit.Shared = func(b batchagent.Backend) (sched.Shared, error) {
		if b.Model != sc.Model {
			return nil, nil
		}
		sr, err := NewSharedRate(c.rdb, c.Key(slices.Concat(key, []string{b.Name})...), SharedRateConfig{
			RPM: max(rl.RPM, 0), TPM: max(rl.TPM, 0), Learn: sc.Hosted, Logger: sc.Logger})
		if err != nil {
			return nil, err
		}
		return sr, nil
	}
	return limits
}
