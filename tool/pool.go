package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/batchagent/batchagent/llm"
)

// Defaults for [PoolConfig].
const (
	// DefaultCacheSize is the default [PoolConfig.CacheSize].
	DefaultCacheSize = 4096
	// DefaultCacheTTL is the default [PoolConfig.CacheTTL].
	DefaultCacheTTL = 10 * time.Minute
	// DefaultMaxResultBytes is the default [PoolConfig.MaxResultBytes].
	DefaultMaxResultBytes = 64 << 10
	// DefaultMaxMediaBytes is the default [PoolConfig.MaxMediaBytes].
	DefaultMaxMediaBytes = 20 << 20
)

// PoolConfig configures a [Pool]. The zero value is valid.
type PoolConfig struct {
	// CacheSize is the most results kept for cacheable tools; the least
	// recently used go first. Defaults to DefaultCacheSize; negative
	// disables caching.
	CacheSize int
	// CacheTTL is how long a cached result stays valid. Defaults to
	// DefaultCacheTTL; negative is an error.
	CacheTTL time.Duration
	// MaxResultBytes bounds a result's length: longer results keep their
	// first MaxResultBytes bytes (cut on a UTF-8 boundary) followed by the
	// marker "\n[truncated: N of M bytes shown]", which is not counted.
	// Defaults to DefaultMaxResultBytes; negative means no limit.
	MaxResultBytes int
	// MaxMediaBytes bounds the media of one result of a [MediaTool]: the
	// sum of [MediaBytes] over its parts. Media cannot be cut, so a
	// result over it fails the call with an error naming its size and
	// the cap; MaxResultBytes bounds the result's text alone. Defaults
	// to DefaultMaxMediaBytes; negative means no limit.
	MaxMediaBytes int64
	// Timeout bounds each execution. Zero means none; negative is an error.
	// [Policy.Timeout] overrides it for one tool.
	Timeout time.Duration
	// Policies limits tools by name: rate, concurrency, timeout,
	// coalescing and batching (see [Policy]). A tool without one has the
	// zero Policy. Names of tools the pool does not have, and invalid
	// policies, are an error. NewPool copies the map.
	Policies map[string]Policy
	// Shared is a cache of tool results shared with other processes: a
	// cacheable tool's call that misses the local cache looks there before
	// it executes, and a result it executes is stored there too, for
	// CacheTTL. Its errors are logged, and the tool runs as if it missed;
	// after one, the pool leaves the shared cache alone for five seconds.
	// Calls of a [Batcher] use the local cache only. Keys are the tool's
	// name and a hash of its Spec and the call's canonical arguments, so
	// tools of the same name and Spec share results: give tools that act
	// differently different names or descriptions. Defaults to nil: the
	// cache is this pool's alone.
	Shared Cache
	// Logger receives warnings (the shared cache failing). Defaults to a
	// logger that discards.
	Logger *slog.Logger
}

func (c PoolConfig) withDefaults() PoolConfig {
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.MaxMediaBytes == 0 {
		c.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c PoolConfig) validate() error {
	var errs []error
	if c.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("tool: negative CacheTTL %v", c.CacheTTL))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tool: negative Timeout %v", c.Timeout))
	}
	return errors.Join(errs...)
}

// Pool executes the tool calls of many agents. Identical calls (same tool,
// same canonical arguments) that overlap in time are coalesced into one
// execution whose result every caller receives; successful results of
// cacheable tools are cached; calls to a [Batcher] are grouped into batches
// that execute as one. Executions then obey their tool's [Policy]: a rate,
// a concurrency limit and a timeout. Panics are recovered and long results
// are truncated.
//
// A Pool is safe for concurrent use. Its tools are fixed at construction.
type Pool struct {
	entries   map[string]*entry // immutable after NewPool
	order     []*entry          // registration order; immutable after NewPool
	available string            // "a, b, c", for ErrUnknownTool messages
	cfg       PoolConfig        // with defaults applied

	mu      sync.Mutex // protects flights, cache, each entry's open batch and the batches' state
	flights map[string]*flight
	cache   *simplelru.LRU[string, cached] // nil when caching is off

	sharedFailing   atomic.Bool  // the shared cache's last answer was an error
	sharedRestUntil atomic.Int64 // Unix nanoseconds until which calls skip the shared cache
}

// entry is one registered tool, its limits and its counters.
type entry struct {
	tool      Tool
	batcher   Batcher   // tool, when it is one; nil otherwise
	media     MediaTool // tool, when it is one; nil otherwise
	spec      Spec
	limits    limits
	cacheable bool              // results are cached: Spec.Cacheable, caching on and coalescing on
	shared    bool              // results are shared too: cacheable, PoolConfig.Shared set, not a Batcher
	digest    [sha256.Size]byte // identifies the tool in the shared cache's keys

	open *batch // the batch calls join; guarded by Pool.mu

	requested, executed, coalesced, cacheHits, sharedHits, failed, batches atomic.Int64
}

// cached is a cache value.
type cached struct {
	result  string
	media   []llm.Part // shared, read-only; nil for a text result
	expires time.Time
}

// flight is one execution, or one item of a batch, and the callers waiting
// for it.
type flight struct {
	done    chan struct{} // closed once result and err are set
	result  string
	media   []llm.Part // shared by every caller, read-only
	err     error
	cancel  context.CancelCauseFunc // cancels the execution's context; nil for a batch item
	batch   *batch                  // the batch of a batch item; nil otherwise
	waiters int                     // callers still waiting; guarded by Pool.mu
	settled bool                    // result is set; guarded by Pool.mu
}

// errGoexit is what the callers of a tool that called runtime.Goexit get.
var errGoexit = errors.New("tool function called runtime.Goexit")

// errAbandoned is the cause of an execution's context when every caller has
// left.
var errAbandoned = errors.New("tool: every caller left")

// NewPool returns a Pool of tools, in that order. Spec is called once per tool.
// It fails if a tool is nil, a name is invalid or registered twice, a Spec's
// Parameters is not a JSON object, cfg is invalid, or a policy names a tool
// not in tools or is invalid; the error lists every problem.
func NewPool(tools []Tool, cfg PoolConfig) (*Pool, error) {
	cfg = cfg.withDefaults()
	errs := []error{cfg.validate()}
	p := &Pool{
		entries: make(map[string]*entry, len(tools)),
		cfg:     cfg,
		flights: make(map[string]*flight),
	}
	names := make([]string, 0, len(tools))
	for i, t := range tools {
		if t == nil {
			errs = append(errs, fmt.Errorf("tool: tools[%d] is nil", i))
			continue
		}
		spec := t.Spec()
		switch {
		case !validName(spec.Name):
			errs = append(errs, fmt.Errorf("tool: invalid tool name %q: want 1 to 64 characters from [a-zA-Z0-9_-]", spec.Name))
			continue
		case p.entries[spec.Name] != nil:
			errs = append(errs, fmt.Errorf("tool: duplicate tool name %q", spec.Name))
			continue
		}
		if spec.Parameters == nil {
			spec.Parameters = json.RawMessage(`{"type":"object"}`)
		} else {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(spec.Parameters, &obj); err != nil || obj == nil {
				errs = append(errs, fmt.Errorf("tool %s: Parameters must be a JSON Schema object", spec.Name))
				continue
			}
			spec.Parameters = bytes.Clone(spec.Parameters)
		}
		e := &entry{tool: t, spec: spec}
		e.batcher, _ = t.(Batcher)
		e.media, _ = t.(MediaTool)
		policy := cfg.Policies[spec.Name]
		if perrs := policy.validate(spec.Name, e.batcher != nil); len(perrs) > 0 {
			errs = append(errs, perrs...)
		} else {
			e.limits = newLimits(policy, cfg)
		}
		p.entries[spec.Name] = e
		p.order = append(p.order, e)
		names = append(names, spec.Name)
	}
	errs = append(errs, unknownPolicies(cfg.Policies, p.entries))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.available = strings.Join(names, ", ")
	if len(names) == 0 {
		p.available = "none"
	}
	if cfg.CacheSize > 0 {
		cache, err := simplelru.NewLRU[string, cached](cfg.CacheSize, nil)
		if err != nil {
			return nil, fmt.Errorf("tool: %w", err)
		}
		p.cache = cache
	}
	for _, e := range p.order {
		e.cacheable = e.spec.Cacheable && p.cache != nil && e.limits.coalesce
		e.shared = e.cacheable && cfg.Shared != nil && e.batcher == nil
		if e.shared {
			e.digest = specDigest(e.spec)
		}
	}
	return p, nil
}

// Specs returns the tools' specs in registration order. A nil Parameters is
// reported as {"type":"object"}. The slice and the Parameters bytes are the
// caller's.
func (p *Pool) Specs() []Spec {
	specs := make([]Spec, len(p.order))
	for i, e := range p.order {
		specs[i] = e.spec
		specs[i].Parameters = bytes.Clone(e.spec.Parameters)
	}
	return specs
}

// Idempotent reports whether running a call of the tool name more than
// once does no harm: true unless the tool's policy sets
// [Policy.NoCoalesce] or its Spec sets NotIdempotent, each of which
// declares it not idempotent; false for a name the pool does not have. The
// agent starts a call of an idempotent tool while its answer still
// streams, when the stream may yet be cut and the call asked for again;
// any other call waits for the answer's end.
func (p *Pool) Idempotent(name string) bool {
	e := p.entries[name]
	return e != nil && e.limits.coalesce && !e.spec.NotIdempotent
}

// keyBufs recycles the buffers Call builds keys in; buffers that grew past
// maxKeyBuf are left to the garbage collector.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxKeyBuf = 16 << 10

// Call runs the tool name with args for one caller and returns its result.
//
// args must be a JSON object; empty args stand for {}. Call canonicalises it
// (decoded with UseNumber, re-encoded with sorted keys and no HTML escaping),
// so calls that differ only in key order or whitespace are identical. Then, in
// order:
//   - a cacheable tool's unexpired cached result is returned;
//   - if an identical call is executing, Call waits for its result (unless
//     the tool's policy sets [Policy.NoCoalesce]);
//   - with a shared cache ([PoolConfig.Shared]), a cacheable tool's
//     unexpired result there is returned (identical calls that arrive
//     meanwhile wait for it, as for an execution), and cached locally;
//   - for a [Batcher], the call joins the tool's open batch, opening one if
//     there is none, and waits for its own result; the batch executes as
//     one CallBatch once [Policy.BatchWindow] has passed since its first
//     call or it holds [Policy.BatchMax] calls;
//   - otherwise Call starts an execution and waits for it.
//
// An execution (a single call or a batch) runs in its own goroutine: it
// waits for a rate token, then for a concurrency slot, then runs the tool
// under the tool's timeout ([Policy.Timeout], defaulting to
// [PoolConfig.Timeout]). Cache hits and coalesced calls take no token and
// no slot. The execution's context carries the values of the ctx of the
// call that started it but is cancelled only when every caller waiting for
// it has left (or at the timeout), so one impatient caller never cancels
// the work, or the wait for a token or slot, of the others. A caller leaves
// when its ctx is done: Call then returns ctx.Err(); a caller that leaves a
// batch leaves its item, which is dropped if the batch has not executed yet
// and whose result is discarded otherwise. A tool that ignores its context
// keeps running after everyone has left, until it returns.
//
// Failures come back as a [*CallError]: for an unknown tool (wrapping
// [ErrUnknownTool]), malformed args (wrapping [ErrBadArguments] and the JSON
// error), a tool error, a panic (wrapping a [*PanicError]) and a timeout
// (wrapping [ErrTimeout]). Every caller of an execution gets the same result
// and error; in a batch, each distinct call gets its own [Result], except
// that a panic, a timeout or a wrong number of results fails every call of
// the batch. Results longer than [PoolConfig.MaxResultBytes] are truncated.
// Errors are never cached. A [MediaTool]'s result comes back as its text
// alone: [Pool.CallMedia] returns its media too.
func (p *Pool) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	result, _, err := p.call(ctx, name, args)
	return result, err
}

// CallMedia is [Pool.Call] returning a [MediaTool]'s media with its text;
// for other tools media is nil. The parts are shared with every caller of
// the same execution and with the cache: they are read-only. Media over
// [PoolConfig.MaxMediaBytes] fails the call (a [*CallError] naming the
// size and the cap). Media results are cached like text ones, but never
// in the shared cache ([PoolConfig.Shared]): a call whose result carries
// media is not stored there.
func (p *Pool) CallMedia(ctx context.Context, name string, args json.RawMessage) (string, []llm.Part, error) {
	return p.call(ctx, name, args)
}

// call is Call and CallMedia.
func (p *Pool) call(ctx context.Context, name string, args json.RawMessage) (string, []llm.Part, error) {
	e := p.entries[name]
	if e == nil {
		return "", nil, &CallError{Tool: name, Err: fmt.Errorf("%w %q; available tools: %s", ErrUnknownTool, name, p.available)}
	}
	e.requested.Add(1)

	bufp := keyBufs.Get().(*[]byte)
	buf := append((*bufp)[:0], name...)
	buf = append(buf, 0)
	buf, err := canonicalArgs(buf, args)
	key := string(buf)
	if cap(buf) <= maxKeyBuf {
		*bufp = buf
		keyBufs.Put(bufp)
	}
	if err != nil {
		e.failed.Add(1)
		return "", nil, &CallError{Tool: name, Err: fmt.Errorf("%w: %w", ErrBadArguments, err)}
	}
	if err := ctx.Err(); err != nil {
		e.failed.Add(1)
		return "", nil, err
	}

	var now time.Time
	if e.cacheable {
		now = time.Now()
	}
	p.mu.Lock()
	if e.cacheable {
		if c, ok := p.cache.Get(key); ok {
			if now.Before(c.expires) {
				p.mu.Unlock()
				e.cacheHits.Add(1)
				return c.result, c.media, nil
			}
			p.cache.Remove(key)
		}
	}
	if e.limits.coalesce {
		if f := p.flights[key]; f != nil {
			f.waiters++
			p.mu.Unlock()
			e.coalesced.Add(1)
			return p.wait(ctx, e, key, f)
		}
	}
	f := &flight{done: make(chan struct{}), waiters: 1}
	if e.limits.coalesce {
		p.flights[key] = f
	}
	if e.batcher != nil {
		start := p.joinLocked(ctx, e, key, f)
		p.mu.Unlock()
		if start != nil {
			go start()
		}
		return p.wait(ctx, e, key, f)
	}
	// The execution keeps ctx's values but not its cancellation: it belongs
	// to every waiter, not to the caller that happened to start it.
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	f.cancel = cancel
	p.mu.Unlock()
	if !e.shared { // else run counts an execution or a hit
		e.executed.Add(1)
	}
	go p.run(execCtx, e, key, json.RawMessage(key[len(name)+1:]), f)
	return p.wait(ctx, e, key, f)
}

// wait waits for f's result or for ctx, whichever comes first. The last
// caller to leave an unsettled flight removes it from the in-flight map, so
// later callers start afresh, and cancels its execution; for a batch item,
// it leaves the batch instead (see leaveLocked).
func (p *Pool) wait(ctx context.Context, e *entry, key string, f *flight) (string, []llm.Part, error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		p.mu.Lock()
		if !f.settled {
			f.waiters--
			var cancel func()
			if f.waiters == 0 {
				if p.flights[key] == f {
					delete(p.flights, key)
				}
				if f.batch != nil {
					cancel = p.leaveLocked(e, f.batch)
				} else {
					cancel = func() { f.cancel(errAbandoned) }
				}
			}
			p.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			e.failed.Add(1)
			return "", nil, ctx.Err()
		}
		p.mu.Unlock() // the result arrived meanwhile: take it
	}
	if f.err != nil {
		e.failed.Add(1)
		return "", nil, f.err
	}
	return f.result, f.media, nil
}

// run settles f from the shared cache, for a tool whose results are
// shared, or else waits for e's limits, executes f, settles it and shares
// a successful result. It owns ctx's cancellation.
func (p *Pool) run(ctx context.Context, e *entry, key string, args json.RawMessage, f *flight) {
	defer f.cancel(context.Canceled)
	if e.shared {
		if result, expires, ok := p.sharedGet(ctx, e, key); ok {
			e.cacheHits.Add(1)
			e.sharedHits.Add(1)
			p.settleUntil(e, key, f, result, nil, nil, expires)
			return
		}
		e.executed.Add(1)
	}
	p.runLimited(ctx, e, execution{key: key, f: f}, func(ctx context.Context) {
		result, media, err := p.execute(ctx, e, args)
		if err == nil && p.cfg.MaxMediaBytes >= 0 {
			if n := MediaBytes(media); n > p.cfg.MaxMediaBytes {
				err = fmt.Errorf("its media are %d bytes, over the limit of %d bytes (MaxMediaBytes)", n, p.cfg.MaxMediaBytes)
			}
		}
		switch {
		case err != nil && context.Cause(ctx) == e.limits.timeoutErr:
			p.settle(e, key, f, "", &CallError{Tool: e.spec.Name, Err: e.limits.timeoutErr})
		case err != nil:
			p.settle(e, key, f, "", &CallError{Tool: e.spec.Name, Err: err})
		default:
			result, expires := truncate(result, p.cfg.MaxResultBytes), time.Now().Add(p.cfg.CacheTTL)
			if e.shared && len(media) == 0 {
				// Before the callers get it: once a call returns, the
				// other pools find its result. Media stay local.
				p.sharedSet(ctx, e, key, result, expires)
			}
			p.settleUntil(e, key, f, result, media, nil, expires)
		}
	})
}

// execution names the flights one execution settles: the flight f of key,
// for a single call, or every item of a batch.
type execution struct {
	key   string
	f     *flight     // nil for a batch
	items []batchItem // for a batch
}

// fail settles the flights of x that have no outcome yet with err.
func (p *Pool) fail(e *entry, x execution, err error) {
	if x.f == nil {
		p.settleAll(e, x.items, err)
		return
	}
	p.settle(e, x.key, x.f, "", err)
}

// runLimited runs x, one execution of e: it waits for e's rate token and
// concurrency slot, then calls exec under e's timeout and gives the slot
// back once exec returns. exec settles x's flights. Instead, they are
// settled with a *CallError when ctx ends before the token or the slot
// comes (wrapping ctx's cause), at the timeout even if the tool ignores its
// context (wrapping ErrTimeout), and when exec calls runtime.Goexit; exec's
// own settling of a flight settled this way changes nothing.
func (p *Pool) runLimited(ctx context.Context, e *entry, x execution, exec func(ctx context.Context)) {
	if err := e.limits.acquire(ctx); err != nil {
		p.fail(e, x, &CallError{Tool: e.spec.Name, Err: err})
		return
	}
	defer e.limits.release()
	if e.limits.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, e.limits.timeout, e.limits.timeoutErr)
		defer cancel()
		// Settle at the deadline even if the tool ignores its context.
		stop := context.AfterFunc(ctx, func() {
			if context.Cause(ctx) == e.limits.timeoutErr {
				p.fail(e, x, &CallError{Tool: e.spec.Name, Err: e.limits.timeoutErr})
			}
		})
		defer stop()
	}
	returned := false
	defer func() {
		if !returned { // the tool called runtime.Goexit
			p.fail(e, x, &CallError{Tool: e.spec.Name, Err: errGoexit})
		}
	}()
	exec(ctx)
	returned = true
}

// execute calls the tool (CallMedia for a MediaTool), turning a panic
// into a *PanicError.
func (p *Pool) execute(ctx context.Context, e *entry, args json.RawMessage) (result string, media []llm.Part, err error) {
	defer func() {
		if v := recover(); v != nil {
			result, media, err = "", nil, &PanicError{Tool: e.spec.Name, Value: v, Stack: debug.Stack()}
		}
	}()
	if e.media != nil {
		return e.media.CallMedia(ctx, args)
	}
	result, err = e.tool.Call(ctx, args)
	return result, nil, err
}

// settle records f's outcome, unless it already has one, wakes its waiters and
// caches a successful result of a cacheable tool.
func (p *Pool) settle(e *entry, key string, f *flight, result string, err error) {
	p.settleUntil(e, key, f, result, nil, err, time.Time{})
}

// settleUntil is settle of a result with media, caching a successful
// result until expires (zero: for CacheTTL from now).
func (p *Pool) settleUntil(e *entry, key string, f *flight, result string, media []llm.Part, err error, expires time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.settled {
		return
	}
	f.settled = true
	f.result, f.media, f.err = result, media, err
	if p.flights[key] == f {
		delete(p.flights, key)
	}
	if err == nil && e.cacheable {
		if expires.IsZero() {
			expires = time.Now().Add(p.cfg.CacheTTL)
		}
		p.cache.Add(key, cached{result: result, media: media, expires: expires})
	}
	close(f.done)
}

// truncate cuts s to at most limit bytes on a UTF-8 boundary and appends the
// truncation marker. A negative limit means none.
func truncate(s string, limit int) string {
	if limit < 0 || len(s) <= limit {
		return s
	}
	n := utf8Cut(s, limit)
	return fmt.Sprintf("%s\n[truncated: %d of %d bytes shown]", s[:n], n, len(s))
}

// utf8Cut returns where to cut s so that s[:n] has at most limit bytes and
// splits no rune: limit if s[limit] starts a rune, or else the start of the
// rune that s[limit] continues, which may be 0. Where s is not UTF-8 (no
// rune starts in the utf8.UTFMax bytes up to s[limit]) it returns limit. s
// must be longer than limit, and limit not negative.
func utf8Cut[S ~string | ~[]byte](s S, limit int) int {
	for n := limit; n >= 0 && limit-n < utf8.UTFMax; n-- {
		if utf8.RuneStart(s[n]) {
			return n
		}
	}
	return limit
}

// Stats counts one tool's calls. For every call, Requested is incremented
// and then exactly one of CacheHits, Coalesced and Executed, unless the
// arguments were malformed or the caller's context was already done, or the
// tool is a [Batcher]: then a call that is neither a cache hit nor coalesced
// joins a batch, and Executed and Batches count batches.
type Stats struct {
	// Name is the tool's name.
	Name string
	// Requested counts calls naming the tool.
	Requested int64
	// Executed counts executions started, including those whose callers
	// all left while they waited for a rate token or concurrency slot. A
	// batch counts as one execution.
	Executed int64
	// Coalesced counts calls that joined an execution already in flight.
	Coalesced int64
	// CacheHits counts calls answered from the cache: the local one, or
	// the shared one ([PoolConfig.Shared]).
	CacheHits int64
	// SharedHits counts the CacheHits the shared cache answered.
	SharedHits int64
	// Errors counts calls that returned an error, for whatever reason:
	// malformed arguments, the tool's failure, or the caller leaving.
	Errors int64
	// Batches counts CallBatch executions of a [Batcher] (each also counted
	// in Executed).
	Batches int64
}

// Stats returns a snapshot of each tool's counters, in registration order.
// The counters are read one by one, so a snapshot taken while calls are
// running need not add up.
func (p *Pool) Stats() []Stats {
	stats := make([]Stats, len(p.order))
	for i, e := range p.order {
		stats[i] = Stats{
			Name:       e.spec.Name,
			Requested:  e.requested.Load(),
			Executed:   e.executed.Load(),
			Coalesced:  e.coalesced.Load(),
			CacheHits:  e.cacheHits.Load(),
			SharedHits: e.sharedHits.Load(),
			Errors:     e.failed.Load(),
			Batches:    e.batches.Load(),
		}
	}
	return stats
}
