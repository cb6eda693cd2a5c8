package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/batchagent/batchagent/internal/config"
)

// runFile is a file a run reads or writes, as messages name it.
type runFile struct {
	subject string // how it is named as the subject of a message: "--out", "output"
	object  string // how it is named as what another file is: "the inputs file", "the --out file"
	path    string // as given
	fix     string // for a file written, how to name it otherwise: "pick another --out"
}

// outputFile is the output of a run as checkRunFiles takes it: path, the
// --out flag's file (flag set) or the job file's output.
func outputFile(path string, flag bool) runFile {
	if flag {
		return runFile{subject: "--out", object: "the --out file", path: path, fix: "pick another --out"}
	}
	return runFile{subject: "output", object: "the output file", path: path, fix: "change output: in the job file, or pass --out"}
}

// jobReads returns the files a run of the job file at path reads: the job
// file, the inputs at inPath, the output schema files and the SQLite
// databases of its tools. Empty paths are left out.
func jobReads(path string, cj *config.Job, inPath string) []runFile {
	reads := []runFile{
		{object: "the job file", path: path},
		{object: "the inputs file", path: inPath},
		{object: "the output schema file", path: cj.SchemaFile},
	}
	if cj.Reduce != nil {
		reads = append(reads, runFile{object: "the reduce step's output schema file", path: cj.Reduce.SchemaFile})
	}
	for _, t := range cj.Tools {
		var db string
		switch s := t.Settings.(type) {
		case *config.SQLQuery:
			db = s.Database
		case *config.SQLLookup:
			db = s.Database
		}
		reads = append(reads, runFile{object: "the database of tool " + t.Name, path: db})
	}
	return reads
}

// checkRunFiles refuses a run whose files collide: a file it writes
// (writes: its output, its state file) that is a file it reads (reads),
// or another file it writes. Two names are one file when their cleaned,
// absolute paths with symlinks resolved are equal, or when they name the
// same existing file (os.SameFile: a hard link). Files that are not
// regular (a device such as /dev/stdout, a pipe) never collide: they are
// not replaced by writing. The error names both files; nothing has been
// opened for writing when it is returned.
func checkRunFiles(writes, reads []runFile) error {
	for i, w := range writes {
		if w.path == "" {
			continue
		}
		for _, r := range reads {
			if r.path != "" && sameFile(w.path, r.path) {
				return fmt.Errorf("%s %s is %s %s: writing it would destroy what the run reads; nothing was run or written: %s",
					w.subject, w.path, r.object, r.path, w.fix)
			}
		}
		for _, o := range writes[:i] {
			if o.path != "" && sameFile(w.path, o.path) {
				return fmt.Errorf("%s %s is %s %s: give %s a name of its own (%s); nothing was run or written",
					w.subject, w.path, o.object, o.path, w.object, w.fix)
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
