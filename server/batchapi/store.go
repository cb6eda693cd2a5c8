package batchapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/batchagent/batchagent/internal/groupcommit"
)

// Store keeps the files and batches of the Batch API in a directory:
// an SQLite database (batches.db: file and batch records, and one row per
// finished line of a batch) and the files' contents (files/ID). It is
// safe for concurrent use. A batch's state survives the process being
// killed: a server given the same store resumes its unfinished batches.
type Store struct {
	dir string
	db  *sql.DB
	w   *groupcommit.Writer[lineRecord] // records finished lines
}

// lineRecord is a finished line on its way to the writer, which commits
// it with others in one transaction.
type lineRecord struct {
	batchID string
	line    int
	failed  bool
	data    []byte
}

// maxGroup caps the lines the writer commits in one transaction.
const maxGroup = 512

const batchSchema = `
CREATE TABLE IF NOT EXISTS files (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	obj        TEXT NOT NULL,
	owner      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS batches (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	status     TEXT NOT NULL,
	obj        TEXT NOT NULL,
	owner      TEXT NOT NULL DEFAULT '',
	completed  INTEGER NOT NULL DEFAULT 0,
	failed     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS lines (
	batch_id   TEXT NOT NULL,
	line       INTEGER NOT NULL,
	failed     INTEGER NOT NULL,
	data       TEXT NOT NULL,
	PRIMARY KEY (batch_id, line)
) WITHOUT ROWID;`

// Open opens (creating it if need be) the store in dir, and starts the
// writer of finished lines that [Store.Close] stops.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("batch store %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, "files"), 0o755); err != nil {
		return nil, fmt.Errorf("batch store: %w", err)
	}
	p := filepath.ToSlash(filepath.Join(abs, "batches.db"))
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	q := url.Values{
		"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}
	db, err := sql.Open("sqlite", "file://"+(&url.URL{Path: p}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("batch store %s: %w", p, err)
	}
	if _, err := db.Exec(batchSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("batch store %s: create tables: %w", p, err)
	}
	if err := addOwners(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("batch store %s: %w", p, err)
	}
	s := &Store{dir: abs, db: db}
	s.w = groupcommit.Start(groupcommit.Config[lineRecord]{Commit: s.commit, MaxGroup: maxGroup})
	return s, nil
}

// addOwners adds the owner column to the tables of a store made before
// files and batches had owners: their objects belong to no key.
func addOwners(db *sql.DB) error {
	for _, table := range []string{"files", "batches"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('` + table + `') WHERE name = 'owner'`).Scan(&n); err != nil {
			return fmt.Errorf("read the columns of %s: %w", table, err)
		}
		if n == 0 {
			if _, err := db.Exec(`ALTER TABLE ` + table + ` ADD COLUMN owner TEXT NOT NULL DEFAULT ''`); err != nil {
				return fmt.Errorf("add owners to %s: %w", table, err)
			}
		}
	}
	return nil
}

// Close commits the lines waiting, stops the store's writer and closes
// its database. Lines recorded after Close fail.
func (s *Store) Close() error {
	if err := s.w.Close(); err != nil {
		return nil // closed before
	}
	return s.db.Close()
}

// commit records a group of finished lines and counts them, in one
// transaction.
func (s *Store) commit(group []lineRecord) error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record lines: %w", err)
	}
	defer tx.Rollback()
	for _, r := range group {
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO lines (batch_id, line, failed, data) VALUES (?, ?, ?, ?)`, r.batchID, r.line, r.failed, string(r.data))
		if err != nil {
			return fmt.Errorf("record line %d of batch %s: %w", r.line, r.batchID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			col := "completed"
			if r.failed {
				col = "failed"
			}
			if _, err := tx.ExecContext(ctx, `UPDATE batches SET `+col+` = `+col+` + 1 WHERE id = ?`, r.batchID); err != nil {
				return fmt.Errorf("record line %d of batch %s: %w", r.line, r.batchID, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record lines: %w", err)
	}
	return nil
}

// errNoRecord is returned for an unknown file or batch.
var errNoRecord = errors.New("no such record")

func (s *Store) filePath(id string) string { return filepath.Join(s.dir, "files", id) }

// createFile writes r's content as a new file record of owner and returns
// its object. A content longer than limit bytes is refused.
func (s *Store) createFile(ctx context.Context, owner string, f fileObject, r io.Reader, limit int64) (fileObject, error) {
	path := s.filePath(f.ID)
	out, err := os.Create(path + ".tmp")
	if err != nil {
		return f, err
	}
	n, err := io.Copy(out, io.LimitReader(r, limit+1))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = errTooLarge
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		os.Remove(path + ".tmp")
		return f, err
	}
	f.Bytes = n
	b, _ := json.Marshal(f)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO files (id, obj, owner) VALUES (?, ?, ?)`, f.ID, string(b), owner); err != nil {
		os.Remove(path)
		return f, fmt.Errorf("record file %s: %w", f.ID, err)
	}
	return f, nil
}

var errTooLarge = errors.New("file too large")

func (s *Store) getFile(ctx context.Context, id string) (fileObject, error) {
	var f fileObject
	var obj string
	err := s.db.QueryRowContext(ctx, `SELECT obj FROM files WHERE id = ?`, id).Scan(&obj)
	if errors.Is(err, sql.ErrNoRows) {
		return f, errNoRecord
	}
	if err != nil {
		return f, fmt.Errorf("read file %s: %w", id, err)
	}
	return f, json.Unmarshal([]byte(obj), &f)
}

// owns reports whether the file or batch (table "files" or "batches") id
// exists and belongs to owner: another key's objects are not found.
func (s *Store) owns(ctx context.Context, table, id, owner string) (bool, error) {
	var got string
	err := s.db.QueryRowContext(ctx, `SELECT owner FROM `+table+` WHERE id = ?`, id).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s %s: %w", table, id, err)
	}
	return got == owner, nil
}

// openFile opens a file's content.
func (s *Store) openFile(id string) (*os.File, error) { return os.Open(s.filePath(id)) }

// errFileInUse refuses to delete the input of an unfinished batch.
var errFileInUse = errors.New("file is the input of a batch not yet finished")

func (s *Store) deleteFile(ctx context.Context, id string) error {
	// The batch reads its input again to finalize: deleting it would
	// leave the batch unable to end.
	var running int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM batches WHERE json_extract(obj, '$.input_file_id') = ?
		AND status NOT IN ('completed', 'failed', 'expired', 'cancelled')`, id).Scan(&running); err != nil {
		return fmt.Errorf("check file %s: %w", id, err)
	}
	if running > 0 {
		return errFileInUse
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM files WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete file %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errNoRecord
	}
	os.Remove(s.filePath(id))
	return nil
}

// listPage returns up to limit objects of owner in table (files or
// batches) after the record with ID after ("" for the newest), newest
// first, and whether more follow.
func (s *Store) listPage(ctx context.Context, table, owner, after string, limit int) ([]json.RawMessage, bool, error) {
	q := `SELECT obj FROM ` + table + ` WHERE owner = ? ORDER BY seq DESC LIMIT ?`
	args := []any{owner, limit + 1}
	if after != "" {
		q = `SELECT obj FROM ` + table + ` WHERE owner = ? AND seq < (SELECT seq FROM ` + table + ` WHERE id = ?) ORDER BY seq DESC LIMIT ?`
		args = []any{owner, after, limit + 1}
	}
	if table == "batches" {
		q = strings.Replace(q, "SELECT obj", "SELECT obj, completed, failed", 1)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", table, err)
	}
	defer rows.Close()
	var out []json.RawMessage
	for rows.Next() {
		var obj string
		if table == "batches" {
			var b batchObject
			var completed, failed int64
			if err := rows.Scan(&obj, &completed, &failed); err != nil {
				return nil, false, err
			}
			if err := json.Unmarshal([]byte(obj), &b); err != nil {
				return nil, false, err
			}
			b.RequestCounts.Completed, b.RequestCounts.Failed = completed, failed
			raw, _ := json.Marshal(b)
			out = append(out, raw)
			continue
		}
		if err := rows.Scan(&obj); err != nil {
			return nil, false, err
		}
		out = append(out, json.RawMessage(obj))
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// createBatch records a new batch of owner.
func (s *Store) createBatch(ctx context.Context, owner string, b batchObject) error {
	raw, _ := json.Marshal(b)
	_, err := s.db.ExecContext(ctx, `INSERT INTO batches (id, status, obj, owner) VALUES (?, ?, ?, ?)`, b.ID, b.Status, string(raw), owner)
	if err != nil {
		return fmt.Errorf("record batch %s: %w", b.ID, err)
	}
	return nil
}

// getBatch returns a batch with its current request counts.
func (s *Store) getBatch(ctx context.Context, id string) (batchObject, error) {
	var b batchObject
	var obj string
	var completed, failed int64
	err := s.db.QueryRowContext(ctx, `SELECT obj, completed, failed FROM batches WHERE id = ?`, id).Scan(&obj, &completed, &failed)
	if errors.Is(err, sql.ErrNoRows) {
		return b, errNoRecord
	}
	if err != nil {
		return b, fmt.Errorf("read batch %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(obj), &b); err != nil {
		return b, fmt.Errorf("read batch %s: %w", id, err)
	}
	b.RequestCounts.Completed, b.RequestCounts.Failed = completed, failed
	return b, nil
}

// updateBatch reads a batch, lets change modify it and writes it back, in
// one transaction. change returns false to leave the batch as it is.
func (s *Store) updateBatch(ctx context.Context, id string, change func(*batchObject) bool) (batchObject, error) {
	var b batchObject
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return b, fmt.Errorf("update batch %s: %w", id, err)
	}
	defer tx.Rollback()
	var obj string
	var completed, failed int64
	err = tx.QueryRowContext(ctx, `SELECT obj, completed, failed FROM batches WHERE id = ?`, id).Scan(&obj, &completed, &failed)
	if errors.Is(err, sql.ErrNoRows) {
		return b, errNoRecord
	}
	if err != nil {
		return b, fmt.Errorf("update batch %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(obj), &b); err != nil {
		return b, fmt.Errorf("update batch %s: %w", id, err)
	}
	b.RequestCounts.Completed, b.RequestCounts.Failed = completed, failed
	if !change(&b) {
		return b, nil
	}
	raw, _ := json.Marshal(b)
	if _, err := tx.ExecContext(ctx, `UPDATE batches SET status = ?, obj = ? WHERE id = ?`, b.Status, string(raw), id); err != nil {
		return b, fmt.Errorf("update batch %s: %w", id, err)
	}
	return b, tx.Commit()
}

// recordLine records a finished line of a batch and counts it, in one
// transaction (shared with other lines finishing at the same time): a
// line recorded is never run again. It returns once the transaction has
// committed, or with an error if it failed or the store is closed.
func (s *Store) recordLine(ctx context.Context, batchID string, line int, failed bool, data []byte) error {
	g, err := s.w.Add(lineRecord{batchID: batchID, line: line, failed: failed, data: data})
	if err != nil {
		return errors.New("batch store closed")
	}
	select {
	case <-g.Done():
		return g.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// doneLines returns the numbers of a batch's recorded lines.
func (s *Store) doneLines(ctx context.Context, batchID string) (map[int]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT line FROM lines WHERE batch_id = ?`, batchID)
	if err != nil {
		return nil, fmt.Errorf("read lines of batch %s: %w", batchID, err)
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		done[n] = true
	}
	return done, rows.Err()
}

// unfinished returns the IDs of the batches not in a final state, oldest
// first.
func (s *Store) unfinished(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM batches WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling') ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("read unfinished batches: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
