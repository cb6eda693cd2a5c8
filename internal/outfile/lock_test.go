//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package outfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/outfile"
)

// TestTakeLockRefusesSecondHolder takes the lock of a file twice, the
// second time by another name (a symlink): it is refused naming the
// holder, and taken once the first lock is closed, whose sidecar is gone.
func TestTakeLockRefusesSecondHolder(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	l, err := outfile.TakeLock(target, "output", "pid 1: first")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target + ".lock"); err != nil || string(got) != "pid 1: first\n" {
		t.Errorf("sidecar = %q, %v, want %q", got, err, "pid 1: first\n")
	}
	_, err = outfile.TakeLock(link, "output", "pid 2: second")
	want := "output " + link + " is in use by another run (pid 1: first; lock " + target + ".lock)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("TakeLock(link) = %v, want an error containing %q", err, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target + ".lock"); !os.IsNotExist(err) {
		t.Errorf("sidecar after Close: %v, want it gone", err)
	}
	l2, err := outfile.TakeLock(link, "output", "pid 2: second")
	if err != nil {
		t.Fatalf("TakeLock after Close = %v", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStaleSidecarDoesNotBlock leaves a sidecar no process holds, as a
// killed run does: the lock is taken, and the sidecar names the new holder.
func TestStaleSidecarDoesNotBlock(t *testing.T) {
	target := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(target+".lock", []byte("pid 9: killed run, a longer line than the next\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := outfile.TakeLock(target, "output", "pid 3: new")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, _ := os.ReadFile(target + ".lock"); string(got) != "pid 3: new\n" {
		t.Errorf("sidecar = %q, want %q", got, "pid 3: new\n")
	}
}

func TestHolderNamesTheRun(t *testing.T) {
	tests := []struct{ out, want string }{
		{"out.jsonl", ": batchagent run job.yaml → out.jsonl"},
		{"", ": batchagent run job.yaml → stdout"},
	}
	for _, tt := range tests {
		got := outfile.Holder("job.yaml", tt.out)
		if !strings.HasPrefix(got, "pid ") || !strings.HasSuffix(got, tt.want) {
			t.Errorf("Holder(job.yaml, %q) = %q, want pid ... %q", tt.out, got, tt.want)
		}
	}
}
