package outfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/internal/outfile"
)

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	out := func(path string) outfile.File {
		return outfile.File{Subject: "--out", Object: "the --out file", Path: path, Fix: "pick another --out"}
	}
	state := func(path string) outfile.File {
		return outfile.File{Subject: "--state", Object: "the state file", Path: path, Fix: "pick another --state"}
	}
	reads := []outfile.File{{Object: "the inputs file", Path: in}, {Object: "nothing", Path: ""}}
	tests := []struct {
		name   string
		writes []outfile.File
		want   string // "" for no error
	}{
		{"apart", []outfile.File{out(filepath.Join(dir, "out.jsonl")), state(filepath.Join(dir, "out.db"))}, ""},
		{"no paths", []outfile.File{out(""), state("")}, ""},
		{"device", []outfile.File{out(os.DevNull), state(os.DevNull)}, ""},
		{"the inputs", []outfile.File{out(in)}, "--out " + in + " is the inputs file " + in + ": writing it would destroy what the run reads; nothing was run or written: pick another --out"},
		{"spelt otherwise", []outfile.File{out(filepath.Join(dir, "x", "..", "in.jsonl"))}, "--out " + filepath.Join(dir, "x", "..", "in.jsonl") + " is the inputs file " + in + ": writing it would destroy what the run reads; nothing was run or written: pick another --out"},
		{"symlink", []outfile.File{out(link)}, "--out " + link + " is the inputs file " + in + ": writing it would destroy what the run reads; nothing was run or written: pick another --out"},
		{"hard link", []outfile.File{out(hard)}, "--out " + hard + " is the inputs file " + in + ": writing it would destroy what the run reads; nothing was run or written: pick another --out"},
		{"two writes", []outfile.File{out(filepath.Join(dir, "o")), state(filepath.Join(dir, "o"))}, "--state " + filepath.Join(dir, "o") + " is the --out file " + filepath.Join(dir, "o") + ": give the state file a name of its own (pick another --state); nothing was run or written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := outfile.CheckFiles(tt.writes, reads)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckFiles = %q, want %q", got, tt.want)
			}
		})
	}
}
