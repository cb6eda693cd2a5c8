package checkpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/klauspost/compress/s2"
)

// item is one state, or one sample, waiting to be written.
type item struct {
	jobID   string
	idx     int
	final   bool        // done or failed: appended to finished
	sample  bool        // a sample of the job (AddSample), not a state; idx is unused
	updated int64       // when Save was called, Unix ns; a sample's time
	buf     *[]byte     // the state's JSON plus a newline; from bufPool
	done    func(error) // for SaveAsync: called after the commit
}

// json returns the item's state without the encoder's newline, or a
// sample's data.
func (it *item) json() []byte {
	data := *it.buf
	return data[:len(data)-1]
}

type itemKey struct {
	jobID string
	idx   int
}

const upsertSQL = `INSERT INTO running (job_id, idx, seq, state, updated)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (job_id, idx) DO UPDATE SET
	seq = excluded.seq, state = excluded.state, updated = excluded.updated`

// upsertRows is how many states one multi-row upsert writes: one
// statement per 64 states instead of 64 amortises SQLite's per-statement
// work.
const upsertRows = 64

// multiUpsertSQL is upsertSQL for upsertRows rows.
var multiUpsertSQL = strings.Replace(upsertSQL, "VALUES (?, ?, ?, ?, ?)",
	"VALUES "+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", upsertRows), ", "), 1)

// segmentBytes is the size past which a commit's final states of one job
// are split into several segments.
const segmentBytes = 4 << 20

// writer commits batches of states on its own connection with statements
// prepared once. It is used by the Store's writer goroutine only.
//
// Its transactions are begun and ended by statements of their own (BEGIN
// IMMEDIATE, COMMIT, ROLLBACK) rather than through [sql.Tx]: a statement
// prepared on a [sql.Conn] is prepared again by [sql.Tx.StmtContext] in
// every transaction, and sql.Tx runs BEGIN and COMMIT through
// sqlite3_exec, which parses them each time. Prepared once, each commit
// parses no SQL at all.
type writer struct {
	conn *sql.Conn
	stmt struct {
		begin, commit, rollback                                              *sql.Stmt
		nextSeq, setSeq, upsert, multi, appendSeg, hasRunning, deleteRunning *sql.Stmt
		addSample                                                            *sql.Stmt
	}

	latest  map[itemKey]int // an item's position among a batch's latest items
	running map[string]bool // whether a job may have rows in running; absent: not looked up yet
	segment []byte          // the lines of the segment being built
	packed  []byte          // the segment compressed
	indexes []byte          // the JSON array of the finished agents' indexes
	args    []any           // statement arguments
}

func newWriter(ctx context.Context, db *sql.DB) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	w := &writer{conn: conn, latest: make(map[itemKey]int), running: make(map[string]bool)}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&w.stmt.begin, `BEGIN IMMEDIATE`},
		{&w.stmt.commit, `COMMIT`},
		{&w.stmt.rollback, `ROLLBACK`},
		{&w.stmt.nextSeq, `SELECT next_seq FROM meta`},
		{&w.stmt.setSeq, `UPDATE meta SET next_seq = ?`},
		{&w.stmt.upsert, upsertSQL},
		{&w.stmt.multi, multiUpsertSQL},
		{&w.stmt.appendSeg, `INSERT INTO finished (seq, job_id, n, states, updated) VALUES (?, ?, ?, ?, ?)`},
		{&w.stmt.hasRunning, `SELECT EXISTS (SELECT 1 FROM running WHERE job_id = ?)`},
		{&w.stmt.deleteRunning, `DELETE FROM running WHERE job_id = ? AND idx IN (SELECT value FROM json_each(?))`},
	} {
		if *p.stmt, err = conn.PrepareContext(ctx, p.sql); err != nil {
			return nil, errors.Join(err, w.close())
		}
	}
	return w, nil
}

// close closes the statements and gives the connection back.
func (w *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{w.stmt.begin, w.stmt.commit, w.stmt.rollback,
		w.stmt.nextSeq, w.stmt.setSeq, w.stmt.upsert, w.stmt.multi,
		w.stmt.appendSeg, w.stmt.hasRunning, w.stmt.deleteRunning, w.stmt.addSample} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, w.conn.Close())...)
}

// commit writes items in one transaction. Of several states of one agent
// only the last is written: the others would be overwritten in the same
// transaction. When it fails, the transaction is rolled back.
func (w *writer) commit(items []item) error {
	keep := w.latestItems(items)
	// Background, not a saver's context: once started, a commit runs to
	// its end whoever stops waiting for it.
	ctx := context.Background()
	if _, err := w.stmt.begin.ExecContext(ctx); err != nil {
		return err
	}
	err := w.write(ctx, items, keep)
	if err == nil {
		_, err = w.stmt.commit.ExecContext(ctx)
	}
	if err != nil {
		// A failed COMMIT (SQLITE_BUSY, say) leaves the transaction open;
		// some errors end it themselves, and then ROLLBACK fails with "no
		// transaction is active", which tells nothing.
		if _, rerr := w.stmt.rollback.ExecContext(ctx); rerr != nil && !strings.Contains(rerr.Error(), "no transaction is active") {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		// What the failed transaction taught about running rows is gone
		// with it.
		clear(w.running)
		return err
	}
	return nil
}

// write runs the statements of one commit, in its transaction.
func (w *writer) write(ctx context.Context, items []item, keep []bool) error {
	var seq int64
	if err := w.stmt.nextSeq.QueryRowContext(ctx).Scan(&seq); err != nil {
		return err
	}
	seq, err := w.writeRunning(ctx, items, keep, seq)
	if err != nil {
		return err
	}
	if seq, err = w.writeFinished(ctx, items, keep, seq); err != nil {
		return err
	}
	if err := w.writeSamples(ctx, items); err != nil {
		return err
	}
	_, err = w.stmt.setSeq.ExecContext(ctx, seq)
	return err
}

// latestItems reports, for each item, whether it is the last of its agent
// in items.
func (w *writer) latestItems(items []item) []bool {
	clear(w.latest)
	keep := make([]bool, len(items))
	for i := range items {
		if items[i].sample {
			continue
		}
		k := itemKey{items[i].jobID, items[i].idx}
		if j, ok := w.latest[k]; ok {
			keep[j] = false
		}
		w.latest[k] = i
		keep[i] = true
	}
	return keep
}

// writeRunning upserts the states of agents in progress, numbered from seq,
// and returns the next number.
func (w *writer) writeRunning(ctx context.Context, items []item, keep []bool, seq int64) (int64, error) {
	args := w.args[:0]
	defer func() {
		clear(args)
		w.args = args[:0]
	}()
	rows := 0
	for i := range items {
		it := &items[i]
		if it.final || it.sample || !keep[i] {
			continue
		}
		w.running[it.jobID] = true
		args = append(args, it.jobID, it.idx, seq, it.json(), it.updated)
		seq++
		if rows++; rows == upsertRows {
			if _, err := w.stmt.multi.ExecContext(ctx, args...); err != nil {
				return 0, err
			}
			args, rows = args[:0], 0
		}
	}
	if rows > 0 {
		one := w.stmt.upsert
		for r := range rows {
			if _, err := one.ExecContext(ctx, args[5*r:5*r+5]...); err != nil {
				return 0, err
			}
		}
	}
	return seq, nil
}

// writeFinished appends the final states, job by job, as segments numbered
// from seq, deletes the running rows of their agents, and returns the next
// number.
func (w *writer) writeFinished(ctx context.Context, items []item, keep []bool, seq int64) (int64, error) {
	pending := make([]bool, len(items))
	for i := range items {
		pending[i] = items[i].final && keep[i]
	}
	appendSeg := w.stmt.appendSeg
	for first := range items {
		if !pending[first] {
			continue
		}
		jobID := items[first].jobID
		seg, n := w.segment[:0], 0
		var updated int64
		flush := func() error {
			w.packed = s2.Encode(w.packed[:cap(w.packed)], seg)
			_, err := appendSeg.ExecContext(ctx, seq, jobID, n, w.packed, updated)
			seq += int64(n)
			seg, n, updated = seg[:0], 0, 0
			return err
		}
		w.indexes = append(w.indexes[:0], '[')
		for i := first; i < len(items); i++ {
			it := &items[i]
			if !pending[i] || it.jobID != jobID {
				continue
			}
			pending[i] = false
			line := *it.buf
			if n > 0 && len(seg)+len(line) > segmentBytes {
				if err := flush(); err != nil {
					return 0, err
				}
			}
			seg = append(seg, line...)
			n++
			updated = max(updated, it.updated)
			if len(w.indexes) > 1 {
				w.indexes = append(w.indexes, ',')
			}
			w.indexes = strconv.AppendInt(w.indexes, int64(it.idx), 10)
		}
		if err := flush(); err != nil {
			return 0, err
		}
		w.segment = seg[:0]
		if err := w.deleteRunning(ctx, jobID); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// deleteRunning deletes the running rows of the agents in w.indexes, which
// have just finished. It is only tidying: their final states have higher
// sequence numbers anyway.
func (w *writer) deleteRunning(ctx context.Context, jobID string) error {
	has, known := w.running[jobID]
	if !known {
		if err := w.stmt.hasRunning.QueryRowContext(ctx, jobID).Scan(&has); err != nil {
			return err
		}
		w.running[jobID] = has
	}
	if !has {
		return nil
	}
	w.indexes = append(w.indexes, ']')
	_, err := w.stmt.deleteRunning.ExecContext(ctx, jobID, string(w.indexes))
	return err
}
