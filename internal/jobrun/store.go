package jobrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/outfile"
)

// stateFileOf returns the run's checkpoint store: the --state flag's file,
// else OUT.state.db beside an output file OUT unless --no-state; "" for
// none.
func stateFileOf(o Options, outPath string) string {
	statePath := o.State
	if statePath == "" && outPath != "" && !o.NoState {
		statePath = outPath + ".state.db"
	}
	return statePath
}

// openStore opens the checkpoint store at statePath, where it is set, and
// has the engine whose settings are cfg save to it (retryFailed: run the
// failed inputs again). r closes it.
func (r *Run) openStore(statePath string, retryFailed bool, cfg *batchagent.Config) error {
	if statePath == "" {
		return nil
	}
	store, err := checkpoint.Open(statePath, checkpoint.Config{})
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	r.closers = append(r.closers, namedCloser{"state", store})
	r.saved = &outfile.Store{Store: store}
	cfg.Checkpoint, cfg.RetryFailed, cfg.StopOnCheckpointError = r.saved, retryFailed, true
	if r.tallies != nil {
		cfg.Checkpoint = r.tallies.checkpointer(r.saved) // the agents' cached calls kept through a resume
	}
	r.statePath = statePath
	return nil
}

// beginRun records the run in its checkpoint store, where it has one, with
// the fingerprint of the job and of the backend URL, and the number of
// inputs where known. It reports whether the run resumes one recorded
// before; force resumes even though the job changed.
func (r *Run) beginRun(ctx context.Context, backend string, force bool) (bool, error) {
	if r.saved == nil {
		return false, nil
	}
	id := r.spec.ID()
	fp := r.spec.Fingerprint()
	fp[checkpoint.BackendPart] = checkpoint.Digest([]byte(backend)) // its query may hold a key
	resumed, err := r.saved.Begin(ctx, id, fp, force)
	if mm, ok := errors.AsType[*checkpoint.MismatchError](err); ok {
		if !slices.ContainsFunc(mm.Changed, func(part string) bool { return part != checkpoint.BackendPart }) {
			return false, fmt.Errorf("%s: job %q changed since its last run: backend (the backend URL); %s",
				r.statePath, mm.JobID, r.changedHint("resume on the new backend, keeping the results so far"))
		}
		return false, fmt.Errorf("%s: job %q changed since its last run: %s, and its saved results were made by the old job; %s",
			r.statePath, mm.JobID, strings.Join(mm.Changed, ", "), r.changedHint("run every input again with the new job, replacing the old job's results"))
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", r.statePath, err)
	}
	if r.total > 0 {
		// For `batchagent status`: inputs without a state are pending.
		if err := r.saved.SetInputs(ctx, id, r.total); err != nil {
			return false, fmt.Errorf("%s: %w", r.statePath, err)
		}
	}
	return resumed, nil
}

// changedHint is the end of the message refusing a run whose job or
// inputs changed since its state was saved: the two ways on, --force
// (which does what force says) and --restart.
func (r *Run) changedHint(force string) string {
	out := "the output"
	if r.outPath != "" {
		out = r.outPath
	}
	return fmt.Sprintf("run again with --force to %s, or with --restart to start a fresh run (%s and %s moved aside to numbered names first, not deleted)",
		force, out, r.statePath)
}

// removeState removes a state file and SQLite's files beside it.
func removeState(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(p) // best effort: the invocation is failing already
	}
}

// saveFailed reports whether a checkpoint save of the run failed: the
// engine is stopping (Job.StopOnCheckpointError), and the agents it stops
// are not results.
func (r *Run) saveFailed() bool {
	return r.engine.Stats().CheckpointErrors > 0
}

// saveError returns the run's error when checkpoint saves failed: the run
// stopped, and the results not saved were not written.
func (r *Run) saveError() error {
	n := r.engine.Stats().CheckpointErrors
	if n == 0 {
		return nil
	}
	err := r.saved.FirstSaveError()
	if err == nil {
		err = errors.New("unknown error")
	}
	if errors.Is(err, checkpoint.ErrFileGone) {
		out := "on stdout"
		if r.outPath != "" {
			out = "in " + r.outPath
		}
		why := "was deleted or renamed"
		if _, serr := os.Stat(r.statePath); serr == nil {
			why = "was replaced by another file"
		}
		return fmt.Errorf("state file %s %s during the run: the run stopped rather than save to a file no name leads to; the %d results saved before are %s, and the results after were not written. "+
			"Its states are gone with it: run again with --restart to start over (it moves the output aside to a numbered name, never deletes it)",
			r.statePath, why, r.resumedLines+r.out.Written(), out)
	}
	return fmt.Errorf("state file %s: %d saves failed (first: %v): the run stopped, and the results that were not saved were not written; fix the cause (a full disk?) and run the same command again to resume",
		r.statePath, n, err)
}
