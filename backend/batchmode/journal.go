package batchmode

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/batchagent/batchagent/llm"
)

// journalSchema is the journal's tables: the submissions (one per batch,
// with where its making got: uploading, creating, running, ended), their
// lines, and the answers read back, by the request's key.
const journalSchema = `
CREATE TABLE IF NOT EXISTS submissions (
	tag      TEXT PRIMARY KEY,
	state    TEXT NOT NULL,
	file_id  TEXT NOT NULL DEFAULT '',
	batch_id TEXT NOT NULL DEFAULT '',
	started  INTEGER NOT NULL,
	lines    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS lines (
	id      TEXT PRIMARY KEY,
	key     TEXT NOT NULL,
	tag     TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	tokens  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS lines_tag ON lines(tag);
CREATE TABLE IF NOT EXISTS answers (
	key  TEXT PRIMARY KEY,
	resp BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`

// journalVersion names the journal's format in its meta table: a file
// written by another format is refused, not misread.
const journalVersion = "batchmode/v1"

// Submission states in the journal.
const (
	stateUploading = "uploading" // lines recorded; the upload may or may not have happened
	stateCreating  = "creating"  // file uploaded; Create may or may not have happened
	stateRunning   = "running"   // the batch exists: poll it
	stateEnded     = "ended"     // results read; nothing left to do
)

// journal is the durable record of a Model's submissions: each state is
// committed before the step that leaves it, so that a process killed at
// any point leaves a journal from which the next one finds every batch it
// may be billed for.
type journal struct {
	db *sql.DB
}

// openJournal opens the journal at path ("" for one in memory, lost with
// the process), creating it when absent.
func openJournal(path string) (*journal, error) {
	var name [8]byte
	_, _ = rand.Read(name[:])
	dsn := "file:batchmode-" + hex.EncodeToString(name[:]) + "?mode=memory&cache=shared"
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("batchmode: journal %s: %w", path, err)
		}
		dsn = "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("batchmode: journal %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(journalSchema); err != nil {
		_ = db.Close() // the schema error is the one to report
		return nil, fmt.Errorf("batchmode: journal %s: not a batch journal: %w", path, err)
	}
	var v string
	switch err := db.QueryRow(`SELECT value FROM meta WHERE name = 'version'`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := db.Exec(`INSERT INTO meta(name, value) VALUES ('version', ?)`, journalVersion); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("batchmode: journal %s: %w", path, err)
		}
	case err != nil:
		_ = db.Close()
		return nil, fmt.Errorf("batchmode: journal %s: %w", path, err)
	case v != journalVersion:
		_ = db.Close()
		return nil, fmt.Errorf("batchmode: journal %s: written as %q, this is %q", path, v, journalVersion)
	}
	return &journal{db: db}, nil
}

func (j *journal) close() error { return j.db.Close() }

// record is one line as the journal keeps it.
type record struct {
	id, key string
	attempt int
	tokens  int64
}

// begin records a submission about to be uploaded, with its lines.
func (j *journal) begin(ctx context.Context, tag string, started time.Time, recs []record) error {
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, `INSERT INTO submissions(tag, state, started, lines) VALUES (?, ?, ?, ?)`,
		tag, stateUploading, started.UnixNano(), len(recs)); err != nil {
		return err
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO lines(id, key, tag, attempt, tokens) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := st.ExecContext(ctx, r.id, r.key, tag, r.attempt, r.tokens); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// set moves a submission on: its state, with the file's or batch's id
// when known (an empty id keeps the recorded one), and when Create starts.
func (j *journal) set(ctx context.Context, tag, state, fileID, batchID string, started time.Time) error {
	_, err := j.db.ExecContext(ctx, `UPDATE submissions SET state = ?,
		file_id = CASE WHEN ? = '' THEN file_id ELSE ? END,
		batch_id = CASE WHEN ? = '' THEN batch_id ELSE ? END,
		started = CASE WHEN ? = 0 THEN started ELSE ? END
		WHERE tag = ?`, state, fileID, fileID, batchID, batchID, nanos(started), nanos(started), tag)
	return err
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// drop forgets a submission that never reached the provider, and its
// lines.
func (j *journal) drop(ctx context.Context, tag string) error {
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM lines WHERE tag = ?`, tag); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM submissions WHERE tag = ?`, tag); err != nil {
		return err
	}
	return tx.Commit()
}

// answered stores the answers of an ended batch's lines and marks the
// batch ended, in one transaction: a process killed before it commits
// reads the batch's results again.
func (j *journal) answered(ctx context.Context, tag string, answers map[string]*llm.Response) error {
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO answers(key, resp) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	for key, r := range answers {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
		if _, err := st.ExecContext(ctx, key, b); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE submissions SET state = ? WHERE tag = ?`, stateEnded, tag); err != nil {
		return err
	}
	return tx.Commit()
}

// answer returns the stored answer to the request with key, or nil.
func (j *journal) answer(ctx context.Context, key string) (*llm.Response, error) {
	var b []byte
	switch err := j.db.QueryRowContext(ctx, `SELECT resp FROM answers WHERE key = ?`, key).Scan(&b); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	r := new(llm.Response)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("stored answer %s: %w", key[:min(len(key), 12)], err)
	}
	return r, nil
}

// pending is a submission the journal holds unended, with its lines.
type pending struct {
	tag, state      string
	fileID, batchID string
	started         time.Time
	n               int
	recs            []record
}

// unended returns the submissions not ended, oldest first, and the
// highest attempt recorded for each key.
func (j *journal) unended(ctx context.Context) ([]*pending, map[string]int, error) {
	rows, err := j.db.QueryContext(ctx, `SELECT tag, state, file_id, batch_id, started, lines FROM submissions WHERE state <> ? ORDER BY started`, stateEnded)
	if err != nil {
		return nil, nil, err
	}
	var subs []*pending
	byTag := map[string]*pending{}
	for rows.Next() {
		p := new(pending)
		var started int64
		if err := rows.Scan(&p.tag, &p.state, &p.fileID, &p.batchID, &started, &p.n); err != nil {
			_ = rows.Close()
			return nil, nil, err
		}
		p.started = time.Unix(0, started)
		subs = append(subs, p)
		byTag[p.tag] = p
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	attempts := map[string]int{}
	rows, err = j.db.QueryContext(ctx, `SELECT id, key, tag, attempt, tokens FROM lines`)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			r   record
			tag string
		)
		if err := rows.Scan(&r.id, &r.key, &tag, &r.attempt, &r.tokens); err != nil {
			return nil, nil, err
		}
		if r.attempt >= attempts[r.key] {
			attempts[r.key] = r.attempt + 1
		}
		if p := byTag[tag]; p != nil {
			p.recs = append(p.recs, r)
		}
	}
	return subs, attempts, rows.Err()
}
