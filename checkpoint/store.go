// Package checkpoint keeps a run's agent states in one SQLite file so that a
// stopped run can resume where it stopped. The file is opened through the
// pure-Go driver modernc.org/sqlite in WAL mode; saves from many goroutines
// are group-committed by one writer goroutine, so the store keeps up with
// hundreds of thousands of saves per second.
//
// The file holds two kinds of state. The latest state of an agent still in
// progress is one row per agent, overwritten after every turn. Final states
// (done or failed) are never overwritten in the normal course of a run, so
// they are appended: one row per commit holds all the final states of that
// commit, one JSON document per line. Every state carries a sequence number
// from one counter kept in the file; when an agent has several stored states
// (a failed agent re-run, say), the one with the highest number is its
// state. Each job also has a run record: its fingerprint ([Store.Begin])
// and, when known, its number of inputs ([Store.SetInputs]), from which
// [Store.Summary] counts the inputs still pending.
package checkpoint

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/groupcommit"
)

// Defaults of [Config].
const (
	DefaultFlushInterval = 5 * time.Millisecond
	DefaultMaxBatch      = 1024
)

// busyTimeoutMillis is how long a connection waits for a lock held by
// another connection (another Store on the same file) before failing.
const busyTimeoutMillis = 5000

// ErrClosed is returned by the methods of a [Store] after [Store.Close].
var ErrClosed = errors.New("checkpoint: store closed")

// ErrFileGone is returned, wrapped, by the saves of a [Store] whose file
// was deleted, renamed or replaced by another file while the Store had it
// open: its commits would go to a file no path names any more, lost when
// the process ends. It sticks: every later save fails with it too.
var ErrFileGone = errors.New("checkpoint: store file deleted or replaced while open")

// ErrUnknownJob is returned by [Store.Summary] for a job the store has no
// record of.
var ErrUnknownJob = errors.New("checkpoint: unknown job")

// ErrNoState is returned by [Store.State] for an agent without a stored
// state.
var ErrNoState = errors.New("checkpoint: no state stored")

// Config tunes a [Store]. The zero Config is valid.
type Config struct {
	// FlushInterval is the group-commit window. Saves that arrive while a
	// transaction commits form the next one, committed as soon as the
	// previous commit finishes; when fewer states are waiting than the last
	// transaction held, the writer waits up to FlushInterval for the
	// savers of that transaction to come back, so that batches stay large
	// under load. A lone saver never waits. A negative value means never
	// wait. Defaults to DefaultFlushInterval.
	FlushInterval time.Duration
	// MaxBatch is the most states one transaction holds. Defaults to
	// DefaultMaxBatch.
	MaxBatch int
}

func (c Config) withDefaults() Config {
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	return c
}

// Store is a run's state in one SQLite file (WAL mode, synchronous=NORMAL,
// with a busy timeout so that several Stores may share a file). It is safe
// for concurrent use. Its methods return [ErrClosed] after Close.
type Store struct {
	db  *sql.DB
	w   *writer // owned by the group-commit goroutine
	gw  *groupcommit.Writer[item]
	cfg Config

	// path is the file's absolute path, and file what it named when the
	// Store opened it; nil for a Store that never writes (OpenReadOnly).
	// Read-only after Open.
	path string
	file os.FileInfo
	gone error // ErrFileGone, wrapped, once found; owned by the group-commit goroutine
}

// batch is the states of one transaction: its Done channel is closed once
// it has been committed, or has failed with its Err.
type batch = groupcommit.Group[item]

// bufPool holds *[]byte buffers for encoded states: appendState writes
// straight into one, which goes back to the pool once its batch is
// committed.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// formatVersion is the file format, kept in SQLite's user_version. Format 1
// (one upserted row per agent for every state) had user_version 0 and a
// table named states. Format 2 lacked runs.inputs, format 3 the table
// forgotten, format 4 the table samples; such files are upgraded when
// opened for writing.
const formatVersion = 5

// schemaSQL creates the tables of an empty file.
//
//   - meta holds next_seq, the sequence number the next saved state gets.
//   - runs holds each job's fingerprint and, when known, its number of
//     inputs (NULL: unknown).
//   - running holds the latest state of each agent in progress, with its
//     sequence number; the row is deleted when the agent's final state is
//     written.
//   - finished holds final states: each row is a segment of n states, one
//     JSON document per line, numbered seq, seq+1, … in line order, and
//     compressed with S2 (github.com/klauspost/compress/s2, block format):
//     JSON states shrink several times, and every byte not written is a
//     byte SQLite copies, checksums and writes twice (WAL, then database)
//     less.
//   - forgotten holds, per agent, the sequence number before which its
//     states are discarded ([Store.Forget]): those of an input that changed.
//   - samples holds readings of each job's counters taken while it ran
//     ([Store.AddSample]): when (at, Unix ns) and the caller's JSON (data),
//     numbered by seq in the order they were added.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS meta (
	id       INTEGER PRIMARY KEY CHECK (id = 0),
	next_seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (id, next_seq) VALUES (0, 1);
CREATE TABLE IF NOT EXISTS runs (
	job_id      TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	inputs      INTEGER,
	created     INTEGER NOT NULL,
	updated     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS running (
	job_id  TEXT NOT NULL,
	idx     INTEGER NOT NULL,
	seq     INTEGER NOT NULL,
	state   BLOB NOT NULL,
	updated INTEGER NOT NULL,
	PRIMARY KEY (job_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS finished (
	seq     INTEGER PRIMARY KEY,
	job_id  TEXT NOT NULL,
	n       INTEGER NOT NULL,
	states  BLOB NOT NULL,
	updated INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS finished_by_job ON finished (job_id, seq);
CREATE TABLE IF NOT EXISTS forgotten (
	job_id TEXT NOT NULL,
	idx    INTEGER NOT NULL,
	min_seq INTEGER NOT NULL,
	PRIMARY KEY (job_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS samples (
	job_id TEXT NOT NULL,
	seq    INTEGER PRIMARY KEY,
	at     INTEGER NOT NULL,
	data   BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_by_job ON samples (job_id, seq);
PRAGMA user_version = 5;`

// Open opens or creates the store at path, creating its tables when they
// are missing, and starts the writer goroutine that [Store.Close] stops.
func Open(path string, cfg Config) (*Store, error) {
	if path == "" {
		return nil, errors.New("checkpoint: open: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	ctx := context.Background()
	// The file is checked (and a new one given its tables) before WAL mode
	// is asked for: the mode is kept in the file, and a file that is not
	// ours must be left as it was.
	if err := prepareFile(ctx, abs); err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	s, err := newStore(ctx, db, cfg, abs)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	return s, nil
}

// newStore returns a Store over db and starts its writer goroutine, which
// [Store.Close] stops. It closes db when it fails. With path, the absolute
// path of db's file, every commit first checks that the path still names
// the file opened (see [ErrFileGone]); "" checks nothing.
func newStore(ctx context.Context, db *sql.DB, cfg Config, path string) (*Store, error) {
	w, err := newWriter(ctx, db) // opens the file
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, w: w, cfg: cfg.withDefaults()}
	if path != "" {
		if s.file, err = os.Stat(path); err != nil {
			return nil, errors.Join(err, w.close(), db.Close())
		}
		s.path = path
	}
	s.gw = groupcommit.Start(groupcommit.Config[item]{
		Commit: s.commit, Done: committed, Window: s.cfg.FlushInterval, MaxGroup: s.cfg.MaxBatch,
	})
	return s, nil
}

// checkFile returns ErrFileGone, wrapped, when s's path no longer names
// the file s opened: deleted, renamed, or replaced by another file. SQLite
// writes through the descriptor it holds, so its commits would reach a
// file that the next run does not find: their states would be lost when
// the process ends. Once found, the error sticks. A stat failing
// otherwise (a permission of the directory taken away, say) is not taken
// for a gone file. It costs one stat(2) per commit, run by the writer
// goroutine only.
func (s *Store) checkFile() error {
	if s.gone != nil || s.file == nil {
		return s.gone
	}
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.gone = fmt.Errorf("%w: %s no longer exists", ErrFileGone, s.path)
	case err == nil && !os.SameFile(fi, s.file):
		s.gone = fmt.Errorf("%w: %s is another file now", ErrFileGone, s.path)
	}
	return s.gone
}

// prepareFile runs createSchema on the file at abs through a connection
// of its own, which leaves the journal mode as it is.
func prepareFile(ctx context.Context, abs string) error {
	db, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return err
	}
	return errors.Join(createSchema(ctx, db), db.Close())
}

// createSchema creates the tables of a new file, in one transaction so
// that Stores opening a new file at once do not interleave, and refuses a
// file of another format.
func createSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version == 0 {
		if err := checkNew(ctx, tx); err != nil {
			return err
		}
	}
	switch {
	case version == 2:
		if err := upgradeFrom2(ctx, tx); err != nil {
			return fmt.Errorf("upgrade from state format 2: %w", err)
		}
	case version == 3 || version == 4:
		// Format 4 adds the table forgotten, format 5 the table samples,
		// which schemaSQL creates.
	case version != 0 && version != formatVersion:
		return fmt.Errorf("unknown state format %d (this batchagent reads format %d)", version, formatVersion)
	}
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return err
	}
	return tx.Commit()
}

// ourNames are the tables and indexes of schemaSQL.
var ourNames = []string{"meta", "runs", "running", "finished", "finished_by_job", "forgotten", "samples", "samples_by_job"}

// checkNew refuses a file of user_version 0 that holds tables of its own:
// a file of format 1, or any SQLite database that is not a state file,
// which schemaSQL would otherwise turn into one. Our own tables alone are
// let through (not expected: schemaSQL sets the version in the same
// transaction).
func checkNew(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var foreign []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		if name == "states" {
			return errors.New("the file was written by an older batchagent (state format 1); use a new state file")
		}
		if !slices.Contains(ourNames, name) {
			foreign = append(foreign, name)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(foreign) > 0 {
		return fmt.Errorf("not a batchagent state file (it holds %s)", strings.Join(foreign, ", "))
	}
	return nil
}

// upgradeFrom2 brings a file of format 2 to format 3: runs gains inputs,
// and a backend part of a fingerprint that is not a digest (batchagent run
// stored the backend URL itself, which may hold a key in its query) is
// replaced by its digest, so that the run still resumes and the URL is
// gone from the file.
func upgradeFrom2(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `ALTER TABLE runs ADD COLUMN inputs INTEGER`); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT job_id, fingerprint FROM runs`)
	if err != nil {
		return err
	}
	fixed := map[string][]byte{}
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			rows.Close()
			return err
		}
		var fp Fingerprint
		if err := json.Unmarshal(data, &fp); err != nil {
			rows.Close()
			return fmt.Errorf("job %q: fingerprint: %w", id, err)
		}
		if b, ok := fp[BackendPart]; ok && !isDigest(b) {
			fp[BackendPart] = Digest([]byte(b))
			if fixed[id], err = json.Marshal(fp); err != nil {
				rows.Close()
				return err
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for id, data := range fixed {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET fingerprint = ? WHERE job_id = ?`, string(data), id); err != nil {
			return err
		}
	}
	return nil
}

// dsn returns the file: URI for the absolute path abs, with the pragmas
// every connection runs: with wal, WAL mode; synchronous=NORMAL (a commit
// survives a crash of the process; the WAL is synced at checkpoints), a
// busy timeout, and transactions that take the write lock at BEGIN.
func dsn(abs string, wal bool) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter: file:///C:/x.db
	}
	pragmas := []string{fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis)}
	if wal {
		pragmas = append(pragmas, "journal_mode(WAL)")
	}
	pragmas = append(pragmas, "synchronous(NORMAL)")
	q := url.Values{
		"_pragma": pragmas,
		"_txlock": {"immediate"},
	}
	return "file://" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}

// Save records one agent's latest state, keyed by st.JobID and st.Index.
// The state is encoded by the calling goroutine, then committed by the
// Store's writer together with the saves of other goroutines. Save blocks
// until the transaction holding the state has committed, so the state is
// durable when Save returns nil, or until ctx ends: it then returns
// ctx.Err(), and the state may still be written (it is queued even when
// ctx has already ended). A later Save for the same job and index
// overwrites an earlier one, within one transaction too. Save returns
// [ErrClosed] after Close, and the commit's error, wrapped, when the
// transaction failed.
func (s *Store) Save(ctx context.Context, st agent.State) error {
	b, err := s.enqueue(&st, nil)
	if err != nil {
		return err
	}
	select {
	case <-b.Done():
		if b.Err() != nil {
			return saveError(st.JobID, st.Index, b.Err())
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SaveAsync is [Store.Save] without the wait: it encodes and queues the
// state and returns; done is called once the transaction holding the state
// has committed (with nil) or failed, or at once when the state cannot be
// queued (with [ErrClosed], say). done is called from the Store's writer
// goroutine, after the commit, and must not block. Close waits until every
// done has been called. SaveAsync encodes *st before it returns and keeps
// nothing of it: the caller may change st at once. (A pointer, not a copy:
// an agent's goroutine saves its final state, and a 400-byte copy on its
// stack made every agent grow its stack once more.)
func (s *Store) SaveAsync(st *agent.State, done func(error)) {
	if _, err := s.enqueue(st, done); err != nil {
		done(err)
	}
}

func saveError(jobID string, idx int, err error) error {
	return fmt.Errorf("checkpoint: save job %q agent %d: %w", jobID, idx, err)
}

// enqueue encodes st and adds it to the open batch, which it returns.
func (s *Store) enqueue(st *agent.State, done func(error)) (*batch, error) {
	buf := bufPool.Get().(*[]byte)
	line, err := appendState((*buf)[:0], st)
	*buf = line // the pool gets the buffer back as grown
	if err != nil {
		bufPool.Put(buf)
		return nil, saveError(st.JobID, st.Index, err)
	}
	return s.add(item{
		jobID:   st.JobID,
		idx:     st.Index,
		final:   st.Status != agent.StatusRunning,
		updated: time.Now().UnixNano(),
		buf:     buf,
		done:    done,
	})
}

// add adds it to the open batch, which it returns; after Close it gives
// it.buf back to the pool and returns ErrClosed.
func (s *Store) add(it item) (*batch, error) {
	b, err := s.gw.Add(it)
	if err != nil {
		bufPool.Put(it.buf)
		return nil, ErrClosed
	}
	return b, nil
}

// commit commits a batch of items, on the group-commit goroutine.
func (s *Store) commit(items []item) error {
	if err := s.checkFile(); err != nil {
		return err
	}
	return s.w.commit(items)
}

// committed answers the SaveAsync callers of a batch committed with err
// and gives the items' buffers back to the pool.
func committed(items []item, err error) {
	for i := range items {
		it := &items[i]
		if it.done != nil {
			var ierr error
			if err != nil {
				ierr = saveError(it.jobID, it.idx, err)
			}
			it.done(ierr)
		}
		bufPool.Put(it.buf)
		*it = item{}
	}
}

// Close commits the pending saves, stops the writer goroutine and closes the
// database. Saves after Close return [ErrClosed]; Close is idempotent.
func (s *Store) Close() error {
	if err := s.gw.Close(); err != nil {
		return nil // closed before
	}
	return errors.Join(s.w.close(), s.db.Close())
}

// isClosed reports whether Close has been called.
func (s *Store) isClosed() bool { return s.gw.Closed() }
