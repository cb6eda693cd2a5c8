package outfile

import (
	"context"
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
	// media says, by index, which media file or URL of an input changed
	// since its state was saved (see CheckMedia): "photos/a.png changed".
	media  map[int]string
	first  int // the lowest of changed; -1 for none
	inputs int // the inputs now
}

// CheckInputs reads the inputs in, to their end, and compares each input
// that has a saved state (states, ordered by index) with the input the
// state holds. An input added past the last saved one is new, not
// changed; an input that does not decode is changed where it has a state.
func CheckInputs(in batchagent.Inputs, states []agent.State) *InputCheck {
	c := &InputCheck{changed: map[int]bool{}, first: -1}
	mark := c.mark
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

// A MediaHash returns the SHA-256 (hex) of what a media reference names
// now: media.Loader.Hash.
type MediaHash func(ctx context.Context, ref string) (string, error)

// CheckMedia compares, for each saved state (states, ordered by index)
// whose input is not already changed, the media its task read (the
// references in agent.State.Media that hold a hash) with what they name
// now, hashed by hash one at a time, streamed: a different hash, or a
// reference that cannot be hashed (a file gone, grown past the cap), is a
// changed input, as an edited input line is. A reference with no hash
// (an https URL passed to the provider) is not checked. It returns ctx's
// error if ctx ends first.
func (c *InputCheck) CheckMedia(ctx context.Context, states []agent.State, hash MediaHash) error {
	for si := range states {
		st := &states[si]
		if len(st.Media) == 0 || c.changed[st.Index] {
			continue
		}
		for _, m := range st.Media {
			if m.Hash == "" || m.Ref == "" {
				continue
			}
			now, err := hash(ctx, m.Ref)
			if err := ctx.Err(); err != nil {
				return err
			}
			var why string
			switch {
			case err != nil:
				why = fmt.Sprintf("%s changed since the last run (%v)", m.Ref, strings.TrimPrefix(err.Error(), m.Ref+": "))
			case now != m.Hash:
				why = m.Ref + " changed since the last run"
			default:
				continue
			}
			c.mark(st.Index)
			if c.media == nil {
				c.media = map[int]string{}
			}
			c.media[st.Index] = why
			break
		}
	}
	return nil
}

// mark records input i as changed.
func (c *InputCheck) mark(i int) {
	c.changed[i] = true
	if c.first < 0 || i < c.first {
		c.first = i
	}
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
		if why, ok := c.media[i]; ok {
			what = fmt.Sprintf("%s: input %d: %s", where, i, why)
		}
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
