package outfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a file a run reads or writes, as messages name it.
type File struct {
	Subject string // how it is named as the subject of a message: "--out", "output"
	Object  string // how it is named as what another file is: "the inputs file", "the --out file"
	Path    string // as given; "" for none
	Fix     string // for a file written, how to name it otherwise: "pick another --out"
}

// CheckFiles refuses a run whose files collide: a file it writes
// (writes: its output, its state file) that is a file it reads (reads),
// or another file it writes. Two names are one file when their cleaned,
// absolute paths with symlinks resolved are equal, or when they name the
// same existing file (os.SameFile: a hard link). Files that are not
// regular (a device such as /dev/stdout, a pipe) never collide: they are
// not replaced by writing. Files with no path are left out. The error
// names both files; CheckFiles opens nothing for writing.
func CheckFiles(writes, reads []File) error {
	for i, w := range writes {
		if w.Path == "" {
			continue
		}
		for _, r := range reads {
			if r.Path != "" && sameFile(w.Path, r.Path) {
				return fmt.Errorf("%s %s is %s %s: writing it would destroy what the run reads; nothing was run or written: %s",
					w.Subject, w.Path, r.Object, r.Path, w.Fix)
			}
		}
		for _, o := range writes[:i] {
			if o.Path != "" && sameFile(w.Path, o.Path) {
				return fmt.Errorf("%s %s is %s %s: give %s a name of its own (%s); nothing was run or written",
					w.Subject, w.Path, o.Object, o.Path, w.Object, w.Fix)
			}
		}
	}
	return nil
}

// sameFile reports whether the paths a and b name one regular file, or a
// file yet to be created at one place.
func sameFile(a, b string) bool {
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	if (aerr == nil && !ai.Mode().IsRegular()) || (berr == nil && !bi.Mode().IsRegular()) {
		return false
	}
	if aerr == nil && berr == nil && os.SameFile(ai, bi) {
		return true
	}
	return canonicalPath(a) == canonicalPath(b)
}

// canonicalPath returns path cleaned, absolute, with its symlinks
// resolved; for a file that does not exist, its directory's.
func canonicalPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	dir, base := filepath.Split(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(real, base)
	}
	return abs
}
