package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunStopsWhenStateFileGone deletes the state file of a running run,
// or replaces it with another file: the run must notice at its next save
// and stop with exit 1 and an error naming the state file and what
// happened, rather than go on saving to a file no name leads to; the
// results written before stay in the output, each a whole line.
func TestRunStopsWhenStateFileGone(t *testing.T) {
	const n = 300
	tests := []struct {
		name string
		gone func(t *testing.T, state string)
		want string
	}{
		{"deleted", func(t *testing.T, state string) {
			if err := os.Remove(state); err != nil {
				t.Fatal(err)
			}
		}, "was deleted or renamed during the run"},
		{"replaced", func(t *testing.T, state string) {
			other := state + ".other"
			if err := os.WriteFile(other, []byte("someone else's file\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, state); err != nil {
				t.Fatal(err)
			}
		}, "was replaced by another file during the run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, job, in, _ := slowJob(t, n)
			out := filepath.Join(dir, "out.jsonl")
			state := out + ".state.db"
			c := startChild(t, "run", job, "--inputs", in, "--out", out, "--backend", "sim://?latency=20ms&seed=4&tool_turns=0", "--quiet")
			waitUntil(t, "10 results", func() bool {
				b, _ := os.ReadFile(out)
				return bytes.Count(b, []byte("\n")) >= 10
			})
			tt.gone(t, state)
			code := c.wait()
			stderr := c.stderr.String()
			if code != 1 || !strings.Contains(stderr, "state file "+state+" "+tt.want) || !strings.Contains(stderr, "--restart") {
				t.Errorf("run whose state file was %s: exit %d, stderr:\n%s\nwant exit 1 naming %s, %q and --restart", tt.name, code, stderr, state, tt.want)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			lines := readLines(t, string(b)) // fails on a torn line
			seen := map[int]bool{}
			for _, l := range lines {
				if l.Error != nil || l.Output == nil || seen[l.Index] {
					t.Errorf("line of index %d: error %+v, output %v, seen before %v", l.Index, l.Error, l.Output, seen[l.Index])
				}
				seen[l.Index] = true
			}
			if len(lines) < 10 || len(lines) == n {
				t.Errorf("%d lines in the output, want the 10 or more written before the state file was %s, and not all %d", len(lines), tt.name, n)
			}
			if !strings.Contains(stderr, "the "+strconv.Itoa(len(lines))+" results saved before are in "+out) {
				t.Errorf("stderr does not count the %d results kept in %s:\n%s", len(lines), out, stderr)
			}
		})
	}
}
