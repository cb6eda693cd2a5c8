package respcache

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// Config configures a [Cache]. The zero Config is valid.
type Config struct {
	// Path is the SQLite file. Defaults to [DefaultPath].
	Path string
	// TTL is how long an answer stays valid. Zero means forever.
	TTL time.Duration
	// Nondeterministic caches the answers of requests sampled at a
	// temperature above zero without a seed too. Zero means they pass
	// through uncached.
	Nondeterministic bool
}

// DefaultPath is the cache file of the user: batchagent/responses.db
// under [os.UserCacheDir].
func DefaultPath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("respcache: no user cache directory (set cache.path in the job): %w", err)
	}
	return filepath.Join(dir, "batchagent", "responses.db"), nil
}

// Stats counts a Cache's work since it opened.
type Stats struct {
	// Hits counts calls answered from the cache, Misses those passed to
	// the model (uncacheable calls included), Stored the answers written.
	Hits, Misses, Stored int64
	// Errors counts reads and writes of the file that failed; each was
	// treated as a miss or left unstored.
	Errors int64
	// Saved sums the tokens of the answers the hits reused: what the
	// calls would have cost.
	Saved llm.Usage
}

// Cache is a store of answers to model calls: a SQLite file ([Open]) or
// another [Store] ([New]). It is safe for concurrent use; several
// processes may share its file or store.
type Cache struct {
	cfg     Config
	path    string // "" for a Store not a file
	entries Store

	hits, misses, stored, errs atomic.Int64
	mu                         sync.Mutex
	saved                      llm.Usage
}

// New returns a Cache keeping its answers in s, under cfg's TTL and
// Nondeterministic (cfg.Path is not used). Close closes s.
func New(s Store, cfg Config) (*Cache, error) {
	if s == nil {
		return nil, errors.New("respcache: nil store")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("respcache: ttl %v: must not be negative", cfg.TTL)
	}
	cfg.Path = ""
	return &Cache{cfg: cfg, entries: s}, nil
}

// Open opens the cache file of cfg, creating it (and its directory) when
// absent. A file that is not a cache (a corrupt file, another database)
// is an error that names it.
func Open(cfg Config) (*Cache, error) {
	path := cfg.Path
	if path == "" {
		var err error
		if path, err = DefaultPath(); err != nil {
			return nil, err
		}
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("respcache: ttl %v: must not be negative", cfg.TTL)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("respcache: %s: %w", path, err)
	}
	s, err := openFile(abs)
	if err != nil {
		return nil, err
	}
	cfg.Path = abs
	return &Cache{cfg: cfg, path: abs, entries: s}, nil
}

// Path is the cache's file, absolute; "" for a cache in another Store.
func (c *Cache) Path() string { return c.path }

// Close closes the cache's store.
func (c *Cache) Close() error { return c.entries.Close() }

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	saved := c.saved
	c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stored: c.stored.Load(), Errors: c.errs.Load(), Saved: saved}
}

// Counts returns the calls answered from the cache and the tokens their
// answers had cost: Stats' Hits and Saved, for batchagent.Stats (it is a
// batchagent.CacheCounter).
func (c *Cache) Counts() (calls int64, saved llm.Usage) {
	st := c.Stats()
	return st.Hits, st.Saved
}

// lookup returns the answer stored under key, or nil: absent, expired,
// or unreadable (a failed read or a damaged entry is a miss, never a
// wrong answer).
func (c *Cache) lookup(ctx context.Context, key string) *llm.Response {
	e, ok, err := c.entries.Get(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			c.errs.Add(1)
		}
		return nil
	}
	if !ok {
		return nil
	}
	if c.cfg.TTL > 0 && time.Since(e.Created) > c.cfg.TTL {
		return nil
	}
	if got := sha256.Sum256(e.Response); string(got[:]) != string(e.Sum) {
		c.errs.Add(1)
		return nil
	}
	var r llm.Response
	if err := json.Unmarshal(e.Response, &r); err != nil || !complete(&r) {
		c.errs.Add(1)
		return nil
	}
	return &r
}

// store writes r under key, when it is a complete answer.
func (c *Cache) store(ctx context.Context, key string, r *llm.Response) {
	if !complete(r) {
		return
	}
	blob, err := json.Marshal(r)
	if err != nil {
		c.errs.Add(1)
		return
	}
	sum := sha256.Sum256(blob)
	// The caller's cancellation must not lose an answer already paid for.
	ctx = context.WithoutCancel(ctx)
	if err := c.entries.Put(ctx, key, Entry{Response: blob, Sum: sum[:], Created: time.Now()}, c.cfg.TTL); err != nil {
		c.errs.Add(1)
		return
	}
	c.stored.Add(1)
}

// hit counts an answer reused, its tokens saved, in c and in the tally of
// ctx.
func (c *Cache) hit(ctx context.Context, saved llm.Usage) {
	c.hits.Add(1)
	c.mu.Lock()
	c.saved = c.saved.Add(saved)
	c.mu.Unlock()
	if t := tallyOf(ctx); t != nil {
		t.add(saved)
	}
}

// complete reports whether r is an answer worth keeping: it ended on its
// own (stop) or asked for tools, not cut at the token cap.
func complete(r *llm.Response) bool {
	return r != nil && (r.FinishReason == llm.FinishStop || r.FinishReason == llm.FinishToolCalls)
}
