package outfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/input"
)

// InputCheck compares the inputs of a resumed run with those its saved
// states were made from.
type InputCheck struct {
	changed map[int]bool // indexes whose saved state is of another input, or of an input no longer there
	first   int          // the lowest of changed; -1 for none
	inputs  int          // the inputs now
}

// CheckInputs reads the inputs in, to their end, and compares each input
// that has a saved state (states, ordered by index) with the input the
// state holds. An input added past the last saved one is new, not
// changed; an input that does not decode is changed where it has a state.
func CheckInputs(in batchagent.Inputs, states []agent.State) *InputCheck {
	c := &InputCheck{changed: map[int]bool{}, first: -1}
	mark := func(i int) {
		c.changed[i] = true
		if c.first < 0 || i < c.first {
			c.first = i
		}
	}
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
	return c
}

// Changed reports whether an input changed since the last run.
func (c *InputCheck) Changed() bool { return c.first >= 0 }

// Err describes the first changed input, for a run refused without
// --force, naming the inputs file inPath (JSONL, or CSV by its extension)
// and the state file statePath; hint says what to do.
func (c *InputCheck) Err(inPath, statePath, hint string) error {
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

// inputLine returns the 1-based line of input i of the file at path, or 0
// when it cannot be found.
func inputLine(path string, i int) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	lineOf := input.LineJSONL
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		lineOf = input.LineCSV
	case ".json":
		lineOf = input.LineJSONArray
	}
	line, err := lineOf(f, i)
	if err != nil {
		return 0
	}
	return line
}
