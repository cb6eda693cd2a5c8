package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// errLocked is what flock reports for a lock another process holds.
var errLocked = errors.New("locked")

// Lock is an exclusive lock on a file a run writes (its output or its
// state file), held for the run's lifetime so that two runs never write one
// file at once. It is a flock(2) lock on a sidecar file, FILE.lock, which
// holds a line naming its holder for the message of a run refused. The
// lock goes with the process that holds it, however it ends: a sidecar
// left by a killed run is stale and does not block the next one. Where
// flock(2) is missing the lock guards nothing.
type Lock struct {
	path string // the sidecar
	f    *os.File
}

// TakeLock takes the lock of target, a file of the run (what says which,
// for messages: "output", "state file"), writing holder into the sidecar.
// A lock held by another process, or by another TakeLock of this one, is
// refused at once, with an error naming its holder. The caller releases
// the lock with [Lock.Close].
func TakeLock(target, what, holder string) (*Lock, error) {
	path := target + ".lock"
	if real, err := filepath.EvalSymlinks(target); err == nil {
		path = real + ".lock" // two names of one file share its lock
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("%s %s: lock: %w", what, target, err)
		}
		if err := flock(f); err != nil {
			info, _ := io.ReadAll(io.LimitReader(f, 4<<10)) // best effort: only for the message
			f.Close()
			if !errors.Is(err, errLocked) {
				return nil, fmt.Errorf("%s %s: lock %s: %w", what, target, path, err)
			}
			by := strings.TrimSpace(string(info))
			if by == "" {
				by = "a process that is starting"
			}
			return nil, fmt.Errorf("%s %s is in use by another run (%s; lock %s): wait for it to end or stop it",
				what, target, by, path)
		}
		// The holder before us removes the sidecar as it ends: make sure the
		// file locked is the one at path, not one just unlinked.
		fi, ferr := f.Stat()
		pi, perr := os.Stat(path)
		if ferr == nil && perr == nil && os.SameFile(fi, pi) {
			l := &Lock{path: path, f: f}
			if err := l.write(holder); err != nil {
				return nil, errors.Join(fmt.Errorf("%s %s: lock %s: %w", what, target, path, err), l.Close())
			}
			return l, nil
		}
		f.Close()
	}
}

// write replaces the sidecar's content with holder.
func (l *Lock) write(holder string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(holder+"\n"), 0)
	return err
}

// Close removes the sidecar and releases the lock, in that order: a run
// that opens the sidecar in between finds it unlinked and starts over.
func (l *Lock) Close() error {
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, os.ErrNotExist) {
		rmErr = nil
	}
	return errors.Join(rmErr, l.f.Close())
}

// Holder describes this process for the sidecar of its locks, as a run
// of the job file at jobPath writing outPath ("" for stdout): process,
// host, start time and what it runs. It names the job and output files,
// not the whole command line, which may hold a backend URL with a key.
func Holder(jobPath, outPath string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	out := outPath
	if out == "" {
		out = "stdout"
	}
	return fmt.Sprintf("pid %d on %s since %s: batchagent run %s → %s",
		os.Getpid(), host, time.Now().UTC().Format(time.RFC3339), jobPath, out)
}
