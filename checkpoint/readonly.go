package checkpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// OpenReadOnly opens the existing store at path for reading only: for
// `batchagent status` and `export`, which must work on a state file that
// cannot be written (a read-only file, directory or filesystem) and must
// never change one. The file is opened with SQLite's mode=ro; a WAL-mode
// file whose directory does not allow creating its shared-memory file
// (-shm) is opened immutable=1 instead when no write-ahead log (-wal) is
// beside it, since every committed state is then in the file itself. A log
// that is there but cannot be read is an error that says so: its states
// would otherwise be missed.
//
// The Store reads like one from [Open]. Its writes ([Store.Save],
// [Store.Begin], [Store.SetInputs]) fail with SQLite's read-only error.
// The file is not created, given tables or upgraded: a missing file, one
// that is not a state file or one of another format is an error.
func OpenReadOnly(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("checkpoint: open: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	ctx := context.Background()
	db, err := openRO(ctx, abs, false)
	if err != nil && !hasWAL(abs) {
		// Most likely a WAL-mode file whose -shm cannot be created: with
		// no log beside it, the file alone holds every commit.
		db, err = openRO(ctx, abs, true)
	}
	if err != nil {
		if hasWAL(abs) {
			err = fmt.Errorf("%w (its write-ahead log %s-wal holds recent states: make the directory writable, or copy the files to a writable one)", err, path)
		}
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	s, err := newStore(ctx, db, Config{}, "")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	return s, nil
}

// hasWAL reports whether a non-empty write-ahead log is beside the file.
func hasWAL(abs string) bool {
	fi, err := os.Stat(abs + "-wal")
	return err == nil && fi.Size() > 0
}

// openRO opens the file at abs read-only (immutable: also without locks or
// a -shm file) and checks that it is a state file of this format.
func openRO(ctx context.Context, abs string, immutable bool) (*sql.DB, error) {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	q := url.Values{
		"mode":    {"ro"},
		"_pragma": {fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis)},
	}
	if immutable {
		q.Set("immutable", "1")
	}
	db, err := sql.Open("sqlite", "file://"+(&url.URL{Path: p}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	if err := checkFormat(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkFormat refuses a file that is not a state file of formatVersion,
// without changing it.
func checkFormat(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	switch version {
	case formatVersion, 4, 3: // format 4 lacks only the table samples, 3 also forgotten: read as empty
		return nil
	case 0:
		if err := checkNew(ctx, tx); err != nil {
			return err
		}
		return errors.New("not a batchagent state file (it holds no tables)")
	case 2:
		return errors.New("state format 2: open it once with batchagent run, which upgrades it, to read it read-only")
	}
	return fmt.Errorf("unknown state format %d (this batchagent reads format %d)", version, formatVersion)
}
