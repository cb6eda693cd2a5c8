package checkpoint

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sample is one reading of a run's counters, recorded while it runs; Data is
// opaque JSON owned by the caller (the report package defines it).
//
// The store keeps Data as given (compacted): it must not hold secrets
// (API keys, backend URLs with credentials, prompt text), since anyone
// who can read the state file reads it, and reports built from it are
// shared.
type Sample struct {
	// At is when the reading was taken. It is stored to the nanosecond,
	// without its zone or monotonic reading: [Store.Samples] returns it
	// in the local zone.
	At time.Time
	// Data is the reading: one JSON value.
	Data json.RawMessage
}

// AddSample records a sample of job jobID. It goes through the store's
// group-commit writer (never a transaction of its own), so it costs the
// store nothing measurable at one sample a second. It returns when the sample is
// committed or ctx ends.
//
// AddSample is safe for concurrent use, with Saves too; samples of a job
// added one after another come back from [Store.Samples] in that order.
// It copies sm.Data, which the caller may reuse once it returns. Data
// that is not one JSON value is refused with an error, as is a zero At or
// one outside the years 1678 to 2261.
// When ctx ends first AddSample returns ctx.Err() and the sample may
// still be written. It returns [ErrClosed] after Close, and the commit's
// error, wrapped, when the transaction failed (on a store opened with
// [OpenReadOnly], SQLite's read-only error).
func (s *Store) AddSample(ctx context.Context, jobID string, sm Sample) error {
	fail := func(err error) error { return fmt.Errorf("checkpoint: add sample of job %q: %w", jobID, err) }
	if sm.At.IsZero() {
		return fail(errors.New("sample has no time (At is zero)"))
	}
	if y := sm.At.Year(); y < 1678 || y > 2261 {
		// Outside what Unix nanoseconds in an int64 hold.
		return fail(fmt.Errorf("sample time %v out of range (years 1678 to 2261)", sm.At))
	}
	buf := bufPool.Get().(*[]byte)
	b := bytes.NewBuffer((*buf)[:0])
	err := json.Compact(b, sm.Data)
	*buf = b.Bytes()
	if err == nil && len(*buf) == 0 {
		err = errors.New("empty data")
	}
	if err != nil {
		bufPool.Put(buf)
		return fail(fmt.Errorf("data is not one JSON value: %w", err))
	}
	// The writer cuts the last byte of a state, its encoder's newline.
	*buf = append(*buf, '\n')
	bt, err := s.add(item{jobID: jobID, sample: true, updated: sm.At.UnixNano(), buf: buf})
	if err != nil {
		return err
	}
	select {
	case <-bt.Done():
		if bt.Err() != nil {
			return fail(bt.Err())
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Samples returns the samples of jobID in the order they were added; none,
// and nil, for a job without any. It works on a store opened with
// OpenReadOnly, a file of format 4 included (it has no samples). The
// samples' times are in the local zone.
func (s *Store) Samples(ctx context.Context, jobID string) ([]Sample, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	fail := func(err error) ([]Sample, error) {
		return nil, fmt.Errorf("checkpoint: samples of job %q: %w", jobID, err)
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	var has bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'samples')`).Scan(&has); err != nil {
		return fail(err)
	}
	if !has { // a file of format 4 or 3, opened read-only
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT at, data FROM samples WHERE job_id = ? ORDER BY seq`, jobID)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var (
			at   int64
			data []byte
		)
		if err := rows.Scan(&at, &data); err != nil {
			return fail(err)
		}
		out = append(out, Sample{At: time.Unix(0, at), Data: json.RawMessage(data)})
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return out, nil
}

// writeSamples inserts the samples among items, in their order. Its
// statement is prepared at the first sample, not with the writer's others:
// a file of format 4 opened read-only has no table samples.
func (w *writer) writeSamples(ctx context.Context, items []item) error {
	for i := range items {
		it := &items[i]
		if !it.sample {
			continue
		}
		if w.stmt.addSample == nil {
			st, err := w.conn.PrepareContext(ctx, `INSERT INTO samples (job_id, at, data) VALUES (?, ?, ?)`)
			if err != nil {
				return err
			}
			w.stmt.addSample = st
		}
		if _, err := w.stmt.addSample.ExecContext(ctx, it.jobID, it.updated, it.json()); err != nil {
			return err
		}
	}
	return nil
}
