package outfile

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/batchagent/batchagent/agent"
)

// Open opens the results file at path. A fresh run (plan nil) truncates
// it. A resumed run keeps the lines already there that plan keeps (see
// [Plan]) and appends, returning the indexes those lines hold, so that
// every input ends with exactly one line: a line torn by a kill is cut
// off, a line is kept only when its input has a final saved state it
// matches, once per index. A file that holds a line that is not a result
// is refused. The caller closes the file.
func Open(path string, plan *Plan) (*os.File, map[int]bool, error) {
	if plan == nil {
		f, err := os.Create(path)
		return f, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	written, err := plan.reconcile(f, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, written, nil
}

// Plan says which lines of a resumed run's results file stay: see
// [Open]. It is not modified once made, and the maps it is made from are
// not copied: the caller must not change them.
type Plan struct {
	final       map[int]*agent.State // final states (done, failed) by index
	drop        map[int]bool         // inputs changed since the last run: their lines go
	inputs      int                  // the inputs now; lines of indexes past them go
	ordered     bool                 // keep only the lines before the first missing index, in index order
	retryFailed bool                 // failed results go: their inputs run again
}

// NewPlan returns the plan for a run resuming from states, whose inputs
// were compared with them by chk: the lines of the inputs chk found
// changed go. With ordered the run writes in input order; with
// retryFailed it runs failed inputs again, whose lines go too.
func NewPlan(states []agent.State, chk *InputCheck, ordered, retryFailed bool) *Plan {
	p := &Plan{final: map[int]*agent.State{}, drop: chk.changed, inputs: chk.inputs, ordered: ordered, retryFailed: retryFailed}
	for i := range states {
		if st := &states[i]; st.Status != agent.StatusRunning {
			p.final[st.Index] = st
		}
	}
	return p
}

// Dropped returns the indexes of the inputs changed since the last run,
// whose lines go: their saved states should go too
// ([Store.ForgetChanged]). The caller must not modify the map.
func (p *Plan) Dropped() map[int]bool { return p.drop }

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
func (p *Plan) reconcile(f *os.File, path string) (map[int]bool, error) {
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
