package respcache

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/batchagent/batchagent/llm"
)

// busyTimeoutMillis is how long a connection waits for a lock another
// process holds on the file.
const busyTimeoutMillis = 10000

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

// Cache is a file of answers to model calls. It is safe for concurrent
// use; several processes may share its file.
type Cache struct {
	cfg  Config
	path string
	db   *sql.DB

	hits, misses, stored, errs atomic.Int64
	mu                         sync.Mutex
	saved                      llm.Usage
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
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("respcache: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(abs))
	if err != nil {
		return nil, fmt.Errorf("respcache: %s: %w", abs, err)
	}
	// One connection: statements of this process queue on it instead of
	// meeting each other's locks; other processes wait on the busy
	// timeout.
	db.SetMaxOpenConns(1)
	const schema = `CREATE TABLE IF NOT EXISTS responses (
		key TEXT PRIMARY KEY,
		response BLOB NOT NULL,
		sum BLOB NOT NULL,
		created INTEGER NOT NULL
	)`
	if _, err := db.Exec(schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("respcache: %s is not a usable response cache (remove it, or run with --no-cache): %w", abs, err)
	}
	var check string
	if err := db.QueryRow(`PRAGMA quick_check`).Scan(&check); err != nil || check != "ok" {
		_ = db.Close()
		if err == nil {
			err = errors.New(check)
		}
		return nil, fmt.Errorf("respcache: %s is corrupt (remove it, or run with --no-cache): %w", abs, err)
	}
	cfg.Path = abs
	return &Cache{cfg: cfg, path: abs, db: db}, nil
}

// dsn is the file: URI of abs with the pragmas every connection runs.
func dsn(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	q := url.Values{"_pragma": {fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis), "journal_mode(WAL)", "synchronous(NORMAL)"}}
	return "file://" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}

// Path is the cache's file, absolute.
func (c *Cache) Path() string { return c.path }

// Close closes the file.
func (c *Cache) Close() error { return c.db.Close() }

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	saved := c.saved
	c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stored: c.stored.Load(), Errors: c.errs.Load(), Saved: saved}
}

// lookup returns the answer stored under key, or nil: absent, expired,
// or unreadable (a failed read or a damaged entry is a miss, never a
// wrong answer).
func (c *Cache) lookup(ctx context.Context, key string) *llm.Response {
	var (
		blob, sum []byte
		created   int64
	)
	err := c.db.QueryRowContext(ctx, `SELECT response, sum, created FROM responses WHERE key = ?`, key).Scan(&blob, &sum, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		if ctx.Err() == nil {
			c.errs.Add(1)
		}
		return nil
	}
	if c.cfg.TTL > 0 && time.Since(time.Unix(0, created)) > c.cfg.TTL {
		return nil
	}
	if got := sha256.Sum256(blob); string(got[:]) != string(sum) {
		c.errs.Add(1)
		return nil
	}
	var r llm.Response
	if err := json.Unmarshal(blob, &r); err != nil || !complete(&r) {
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
	if _, err := c.db.ExecContext(ctx, `INSERT OR REPLACE INTO responses (key, response, sum, created) VALUES (?, ?, ?, ?)`,
		key, blob, sum[:], time.Now().UnixNano()); err != nil {
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
