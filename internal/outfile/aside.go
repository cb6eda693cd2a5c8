package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// maxAside is the highest number MoveAside tries before giving up.
const maxAside = 10000

// Aside is a file of an earlier run moved out of the way by --restart:
// from its path From to To.
type Aside struct{ From, To string }

// MoveAside moves the files at paths that exist (the output, the state
// file, the reduce output of an earlier run) out of the way of a fresh
// run: each to PATH.N, with the smallest N ≥ 1 for which no PATH.N is
// taken, one N for all so that they stay together. A state file's SQLite
// files beside it (-wal, which may hold its latest commits, and -shm) move
// with it to PATH.N-wal and PATH.N-shm, where SQLite looks for them.
// Nothing is deleted. Paths that are "" or not regular files (a device)
// are left alone. It returns what it moved, in order; on an error, what
// it moved before it is where it went, named in the error.
func MoveAside(paths ...string) ([]Aside, error) {
	var files []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("--restart: %w", err)
		}
		if fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0 {
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	n, err := freeNumber(files)
	if err != nil {
		return nil, err
	}
	var moved []Aside
	for _, p := range files {
		to := p + "." + strconv.Itoa(n)
		for _, sfx := range []string{"", "-wal", "-shm"} {
			if sfx != "" {
				if _, err := os.Lstat(p + sfx); err != nil {
					continue // a file without one, or not a state file
				}
			}
			if err := os.Rename(p+sfx, to+sfx); err != nil {
				return moved, fmt.Errorf("--restart: %w (moved before: %s)", err, describeAside(moved))
			}
			moved = append(moved, Aside{p + sfx, to + sfx})
		}
	}
	return moved, nil
}

// freeNumber returns the smallest N ≥ 1 for which no file of files has a
// PATH.N, PATH.N-wal or PATH.N-shm.
func freeNumber(files []string) (int, error) {
next:
	for n := 1; n <= maxAside; n++ {
		for _, p := range files {
			for _, sfx := range []string{"", "-wal", "-shm"} {
				_, err := os.Lstat(p + "." + strconv.Itoa(n) + sfx)
				if err == nil {
					continue next
				}
				if !errors.Is(err, fs.ErrNotExist) {
					return 0, fmt.Errorf("--restart: %w", err)
				}
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("--restart: %s.1 to %s.%d are all taken: move some away", files[0], files[0], maxAside)
}

// describeAside lists moved files for messages, "nothing" for none.
func describeAside(moved []Aside) string {
	if len(moved) == 0 {
		return "nothing"
	}
	s := ""
	for i, m := range moved {
		if i > 0 {
			s += ", "
		}
		s += m.From + " to " + m.To
	}
	return s
}
