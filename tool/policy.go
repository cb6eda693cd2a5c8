package tool

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// Defaults for [Policy].
const (
	// DefaultBatchWindow is the default [Policy.BatchWindow].
	DefaultBatchWindow = 5 * time.Millisecond
	// DefaultBatchMax is the default [Policy.BatchMax].
	DefaultBatchMax = 100
)

// Policy limits one tool of a [Pool], set by [PoolConfig.Policies]. The zero
// value means no limits and the defaults below.
//
// Limits apply to executions, not to calls: a call answered from the cache
// or joining an identical call in flight takes no rate token and no
// concurrency slot, and a batch of a [Batcher] is one execution. An
// execution first waits for a rate token, then for a concurrency slot, then
// runs the tool under Timeout; waiting for either does not count towards
// Timeout.
type Policy struct {
	// Rate is the most executions per second, enforced by a token bucket
	// (golang.org/x/time/rate). Zero means unlimited; it must be finite
	// and not negative.
	Rate float64
	// Burst is the bucket's size: how many executions may start at once
	// after an idle spell. Zero means max(1, ceil(Rate)); ignored when Rate
	// is zero.
	Burst int
	// MaxConcurrent is the most executions running at once; executions
	// beyond it wait for a slot, first come first served. Zero means
	// unlimited.
	MaxConcurrent int
	// Timeout bounds each execution. Zero means [PoolConfig.Timeout].
	Timeout time.Duration
	// NoCoalesce runs every call, even identical concurrent ones, for tools
	// that are not idempotent. Such a tool's results are neither cached
	// nor read from the cache, whatever [Spec.Cacheable] says, and an
	// agent runs its calls only once the answer that asks for them has
	// streamed to its end ([Pool.Idempotent]): a call begun mid-stream
	// would have run already if the stream were then cut and the model
	// asked again.
	NoCoalesce bool
	// BatchWindow is, for a [Batcher] only, how long the first call of a
	// batch waits for others to join it. Defaults to DefaultBatchWindow.
	BatchWindow time.Duration
	// BatchMax is, for a [Batcher] only, the most calls in one batch: a
	// batch executes at once when it has this many. Defaults to
	// DefaultBatchMax.
	BatchMax int
}

// validate reports every problem of the policy for the tool name.
// batchable reports whether the tool is a Batcher.
func (p Policy) validate(name string, batchable bool) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("tool %s: policy: "+format, append([]any{name}, args...)...))
	}
	if p.Rate < 0 || math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) {
		bad("Rate %v, want a finite number >= 0", p.Rate)
	}
	if p.Burst < 0 {
		bad("negative Burst %d", p.Burst)
	}
	if p.MaxConcurrent < 0 {
		bad("negative MaxConcurrent %d", p.MaxConcurrent)
	}
	if p.Timeout < 0 {
		bad("negative Timeout %v", p.Timeout)
	}
	if p.BatchWindow < 0 {
		bad("negative BatchWindow %v", p.BatchWindow)
	}
	if p.BatchMax < 0 {
		bad("negative BatchMax %d", p.BatchMax)
	}
	if !batchable && (p.BatchWindow != 0 || p.BatchMax != 0) {
		bad("BatchWindow and BatchMax apply only to batchable tools (tool.Batcher)")
	}
	return errs
}

// limits are a tool's resolved policy: what an execution waits for and how
// long it may run.
type limits struct {
	limiter    *rate.Limiter       // nil when the rate is unlimited
	sem        *semaphore.Weighted // nil when concurrency is unlimited
	timeout    time.Duration       // zero means none
	timeoutErr error               // the cause of a timed-out execution
	coalesce   bool                // identical calls share an execution
	window     time.Duration       // batch window, for a Batcher
	batchMax   int                 // batch size cap, for a Batcher
}

// newLimits resolves p against the pool's configuration.
func newLimits(p Policy, cfg PoolConfig) limits {
	l := limits{
		timeout:  cmp.Or(p.Timeout, cfg.Timeout),
		coalesce: !p.NoCoalesce,
		window:   cmp.Or(p.BatchWindow, DefaultBatchWindow),
		batchMax: cmp.Or(p.BatchMax, DefaultBatchMax),
	}
	l.timeoutErr = fmt.Errorf("%w after %v", ErrTimeout, l.timeout)
	if p.Rate > 0 {
		burst := p.Burst
		if burst == 0 {
			burst = max(1, int(math.Min(math.Ceil(p.Rate), math.MaxInt32)))
		}
		l.limiter = rate.NewLimiter(rate.Limit(p.Rate), burst)
	}
	if p.MaxConcurrent > 0 {
		l.sem = semaphore.NewWeighted(int64(p.MaxConcurrent))
	}
	return l
}

// acquire waits for a rate token and then a concurrency slot, or until ctx
// is done, when it returns ctx's cause and gives back its place in line. On
// success the caller must call release once the execution ends. Neither
// step touches ctx.Done unless it has to wait, which would allocate.
func (l *limits) acquire(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	// Allow takes a token only if one is free and nobody is waiting for
	// it; Wait reserves the next one and gives it back if ctx ends first.
	if l.limiter != nil && !l.limiter.Allow() {
		if err := l.limiter.Wait(ctx); err != nil {
			return cmp.Or(context.Cause(ctx), err)
		}
	}
	if l.sem != nil && !l.sem.TryAcquire(1) {
		if err := l.sem.Acquire(ctx, 1); err != nil {
			return cmp.Or(context.Cause(ctx), err)
		}
	}
	return nil
}

// release gives back the concurrency slot acquire took.
func (l *limits) release() {
	if l.sem != nil {
		l.sem.Release(1)
	}
}

// unknownPolicies reports the names of policies whose tool the pool does not
// have, sorted.
func unknownPolicies(policies map[string]Policy, known map[string]*entry) error {
	var unknown []string
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		if known[name] == nil {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("tool: policies for unknown tools: %s", strings.Join(unknown, ", "))
}
