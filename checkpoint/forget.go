package checkpoint

import (
	"context"
	"database/sql"
	"fmt"
)

// Forget discards the stored states of the agents of jobID at indexes, as
// for inputs that changed since they were saved: Load, State and Summary
// no longer see them (the agents count as pending), and states saved
// afterwards are seen as usual. It returns [ErrClosed] after Close.
func (s *Store) Forget(ctx context.Context, jobID string, indexes []int) error {
	if s.isClosed() {
		return ErrClosed
	}
	if len(indexes) == 0 {
		return nil
	}
	fail := func(err error) error { return fmt.Errorf("checkpoint: forget states of job %q: %w", jobID, err) }
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	// Every state stored so far is numbered below next_seq.
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT next_seq FROM meta`).Scan(&next); err != nil {
		return fail(err)
	}
	for _, idx := range indexes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO forgotten (job_id, idx, min_seq) VALUES (?, ?, ?)
ON CONFLICT (job_id, idx) DO UPDATE SET min_seq = excluded.min_seq`, jobID, idx, next); err != nil {
			return fail(err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM running WHERE job_id = ? AND idx = ?`, jobID, idx); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return nil
}

// readForgotten returns, for the agents of jobID with discarded states,
// the sequence number below which their states are discarded. A file of
// format 3 opened read-only has no table forgotten: nothing is.
func readForgotten(ctx context.Context, tx *sql.Tx, jobID string) (map[int]int64, error) {
	var has bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'forgotten')`).Scan(&has); err != nil || !has {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT idx, min_seq FROM forgotten WHERE job_id = ?`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var m map[int]int64
	for rows.Next() {
		var idx int
		var before int64
		if err := rows.Scan(&idx, &before); err != nil {
			return nil, err
		}
		if m == nil {
			m = map[int]int64{}
		}
		m[idx] = before
	}
	return m, rows.Err()
}
