package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/input"
)

// savedStore is the run's checkpoint store as the engine sees it: the
// states a resumed run loaded to check the inputs and the output are handed
// to the engine's first Load instead of being read twice, and the first
// failed save is kept for the run's error message.
type savedStore struct {
	*checkpoint.Store // Save and SaveAsync (the engine's asynchronous path) wrapped below

	mu      sync.Mutex    // protects the fields below
	states  []agent.State // for the first Load of job, when loaded already
	job     string        // the job of states
	loaded  bool          // states holds the job's states
	saveErr error         // the first failed save
}

// Load returns the states loaded by the CLI the first time the job is
// loaded, then reads the store.
func (s *savedStore) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	s.mu.Lock()
	if s.loaded && jobID == s.job {
		st := s.states
		s.states, s.loaded = nil, false
		s.mu.Unlock()
		return st, nil
	}
	s.mu.Unlock()
	return s.Store.Load(ctx, jobID)
}

// Save saves st, noting a failure.
func (s *savedStore) Save(ctx context.Context, st agent.State) error {
	err := s.Store.Save(ctx, st)
	s.note(err)
	return err
}

// SaveAsync saves st asynchronously, noting a failure.
func (s *savedStore) SaveAsync(st *agent.State, done func(error)) {
	s.Store.SaveAsync(st, func(err error) {
		s.note(err)
		done(err)
	})
}

func (s *savedStore) note(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saveErr == nil {
		s.saveErr = err
	}
}

// firstSaveError returns the first failed save, or nil.
func (s *savedStore) firstSaveError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveErr
}

// loadSaved reads the job's saved states for a resumed run. A state file
// that cannot be read (damaged pages, a state that does not decode) stops
// the run before anything is written: every input would otherwise fail.
func (s *savedStore) loadSaved(ctx context.Context, jobID, statePath string) ([]agent.State, error) {
	states, err := s.Store.Load(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("state file %s cannot be read: %w; nothing was run or written: repair the file, remove it, or pass another --state", statePath, err)
	}
	s.mu.Lock()
	s.states, s.job, s.loaded = states, jobID, true
	s.mu.Unlock()
	return states, nil
}

// forget discards the saved states of the inputs in changed (changed
// since the last run, accepted with --force), in the store and among the
// states preloaded for the engine, so that status and export no longer
// report them and a later resume does not find them changed again.
func (s *savedStore) forget(ctx context.Context, jobID string, changed map[int]bool) error {
	if len(changed) == 0 {
		return nil
	}
	indexes := slices.Sorted(maps.Keys(changed))
	if err := s.Store.Forget(ctx, jobID, indexes); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded && s.job == jobID {
		s.states = slices.DeleteFunc(s.states, func(st agent.State) bool { return changed[st.Index] })
	}
	return nil
}

// inputCheck compares the inputs of a resumed run with those its saved
// states were made from.
type inputCheck struct {
	changed map[int]bool // indexes whose saved state is of another input, or of an input no longer there
	first   int          // the lowest of changed; -1 for none
	inputs  int          // the inputs now
}

// checkInputs reads the inputs at path and compares each input that has a
// saved state (states, ordered by index) with the input the state holds.
// An input added past the last saved one is new, not changed.
func checkInputs(path string, states []agent.State) (*inputCheck, error) {
	c := &inputCheck{changed: map[int]bool{}, first: -1}
	mark := func(i int) {
		c.changed[i] = true
		if c.first < 0 || i < c.first {
			c.first = i
		}
	}
	in, closer, err := readInputs(path)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	si := 0
	for v, err := range in {
		for si < len(states) && states[si].Index < c.inputs {
			si++
		}
		if si < len(states) && states[si].Index == c.inputs {
			if err != nil || !states[si].Input.Same(v) {
				mark(c.inputs)
			}
			si++
		}
		c.inputs++
	}
	for ; si < len(states); si++ {
		mark(states[si].Index)
	}
	return c, nil
}

// err describes the first changed input, for a run refused without
// --force; hint says what to do (runner.changedHint).
func (c *inputCheck) err(inPath, statePath, hint string) error {
	i := c.first
	var what string
	if i >= c.inputs {
		what = fmt.Sprintf("input %d is no longer in %s (it has %d inputs), but %s holds a result for it", i, inPath, c.inputs, statePath)
	} else {
		where := inPath
		if line := inputLine(inPath, i); line > 0 {
			where = fmt.Sprintf("%s:%d", inPath, line)
		}
		what = fmt.Sprintf("%s: input %d differs from the input its saved result in %s was made from", where, i, statePath)
	}
	return fmt.Errorf("%s; %d inputs changed since the last run: %s", what, len(c.changed), hint)
}

// readInputs opens the inputs at path, in the format openInputs reads.
func readInputs(path string) (batchagent.Inputs, io.Closer, error) {
	format, err := inputFormatOf(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("inputs: %w", err)
	}
	return format.decode(f, filepath.Base(path)), f, nil
}

// inputLine returns the 1-based line of input i of the file at path, or 0
// when it cannot be found.
func inputLine(path string, i int) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	lineOf := input.LineJSONL
	if strings.ToLower(filepath.Ext(path)) == ".csv" {
		lineOf = input.LineCSV
	}
	line, err := lineOf(f, i)
	if err != nil {
		return 0
	}
	return line
}

// outputPlan says which lines of a resumed run's results file stay.
type outputPlan struct {
	final       map[int]*agent.State // final states (done, failed) by index
	drop        map[int]bool         // inputs changed since the last run: their lines go
	inputs      int                  // the inputs now; lines of indexes past them go
	ordered     bool                 // keep only the lines before the first missing index, in index order
	retryFailed bool                 // failed results go: their inputs run again
}

// newOutputPlan returns the plan for a run resuming from states.
func newOutputPlan(states []agent.State, chk *inputCheck, ordered, retryFailed bool) *outputPlan {
	p := &outputPlan{final: map[int]*agent.State{}, drop: chk.changed, inputs: chk.inputs, ordered: ordered, retryFailed: retryFailed}
	for i := range states {
		if st := &states[i]; st.Status != agent.StatusRunning {
			p.final[st.Index] = st
		}
	}
	return p
}

// reconcile makes the results file f agree with the state file, so that
// the resumed run ends with exactly one line per input, the one its saved
// state holds: a line torn by a kill is cut off; a line is kept only when
// its input has a final saved state it matches (same outcome, same
// output), once per index; the lines of changed inputs go, and with
// retryFailed those of failures. In ordered mode only the lines before the
// first index without one stay, sorted: the results after it are restored
// from the state file in order as the run goes. f is left positioned at
// its end. It returns the indexes of the lines kept.
//
// The file is rewritten in place, emptied first: a kill midway leaves a
// prefix of the kept lines, and the next resume restores the rest from the
// state file.
func (p *outputPlan) reconcile(f *os.File, path string) (map[int]bool, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	type keptLine struct {
		index int
		line  []byte
	}
	var kept []keptLine
	seen := map[int]bool{}
	for line := range bytes.Lines(data) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v struct {
			Index  *int            `json:"index"`
			Output json.RawMessage `json:"output"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &v) != nil || v.Index == nil {
			return nil, fmt.Errorf("%s: a line is not a result; remove the file or pick another --out", path)
		}
		i := *v.Index
		st := p.final[i]
		failed := len(v.Error) > 0 && string(v.Error) != "null"
		if seen[i] || p.drop[i] || i >= p.inputs || st == nil ||
			failed != (st.Status == agent.StatusFailed) || (failed && p.retryFailed) ||
			(!failed && !sameJSON(v.Output, st.Output)) {
			continue
		}
		seen[i] = true
		kept = append(kept, keptLine{i, line})
	}
	if p.ordered {
		slices.SortFunc(kept, func(a, b keptLine) int { return cmp.Compare(a.index, b.index) })
		n := 0
		for n < len(kept) && kept[n].index == n {
			n++
		}
		for _, k := range kept[n:] {
			delete(seen, k.index)
		}
		kept = kept[:n]
	}
	out := make([]byte, 0, len(data))
	for _, k := range kept {
		out = append(out, k.line...)
	}
	if !bytes.Equal(out, data) {
		if err := f.Truncate(0); err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(out, 0); err != nil {
			return nil, err
		}
	}
	if err := f.Truncate(int64(len(out))); err != nil {
		return nil, err
	}
	if _, err := f.Seek(int64(len(out)), io.SeekStart); err != nil {
		return nil, err
	}
	return seen, nil
}

// sameJSON reports whether a and b are the same JSON text once compacted
// and HTML-escaped, as a result line holds an output.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	var ea, eb bytes.Buffer
	json.HTMLEscape(&ea, ca.Bytes())
	json.HTMLEscape(&eb, cb.Bytes())
	return bytes.Equal(ea.Bytes(), eb.Bytes())
}

// saveFailed reports whether a checkpoint save of the run failed: the
// engine is stopping (Job.StopOnCheckpointError), and the agents it stops
// are not results.
func (r *runner) saveFailed() bool {
	return r.engine.Stats().CheckpointErrors > 0
}

// saveError returns the run's error when checkpoint saves failed: the run
// stopped, and the results not saved were not written.
func (r *runner) saveError() error {
	n := r.engine.Stats().CheckpointErrors
	if n == 0 {
		return nil
	}
	err := r.saved.firstSaveError()
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
