package respcache

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// busyTimeoutMillis is how long a connection waits for a lock another
// process holds on the file.
const busyTimeoutMillis = 10000

// file is the Store of [Open]: a SQLite file (WAL mode, with a busy
// timeout, so that several processes may share it). Expired entries stay
// until replaced: the Cache skips them.
type file struct {
	db *sql.DB
}

// openFile opens the SQLite store at abs, creating it (and its
// directory) when absent.
func openFile(abs string) (*file, error) {
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
	return &file{db: db}, nil
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

// Get reads the entry of key.
func (f *file) Get(ctx context.Context, key string) (Entry, bool, error) {
	var (
		e       Entry
		created int64
	)
	err := f.db.QueryRowContext(ctx, `SELECT response, sum, created FROM responses WHERE key = ?`, key).Scan(&e.Response, &e.Sum, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("respcache: read %s: %w", key, err)
	}
	e.Created = time.Unix(0, created)
	return e, true, nil
}

// Put writes e under key; the file keeps no TTL of its own.
func (f *file) Put(ctx context.Context, key string, e Entry, _ time.Duration) error {
	if _, err := f.db.ExecContext(ctx, `INSERT OR REPLACE INTO responses (key, response, sum, created) VALUES (?, ?, ?, ?)`,
		key, e.Response, e.Sum, e.Created.UnixNano()); err != nil {
		return fmt.Errorf("respcache: write %s: %w", key, err)
	}
	return nil
}

// Close closes the file.
func (f *file) Close() error { return f.db.Close() }
