package jobrun

import (
	"os"

	"github.com/batchagent/batchagent/internal/outfile"
)

// lockRun takes the locks of the run's output file and state file, those
// that are set; r closes them after everything else.
func (r *Run) lockRun(jobPath, statePath string) error {
	holder := outfile.Holder(jobPath, r.outPath)
	for _, t := range []struct{ path, what string }{{statePath, "state file"}, {r.outPath, "output"}} {
		if t.path == "" {
			continue
		}
		if fi, err := os.Stat(t.path); err == nil && !fi.Mode().IsRegular() {
			continue // a device or a pipe (--out /dev/stdout): nothing to guard, and no room for a sidecar
		}
		l, err := outfile.TakeLock(t.path, t.what, holder)
		if err != nil {
			return err
		}
		r.locks = append(r.locks, namedCloser{t.what + " lock", l})
	}
	return nil
}
