package bench_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestStartProfiles writes a CPU profile and a trace, and creates no file
// for a name left empty.
func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "trace.out")
	stop, err := bench.StartProfiles(cpu, tr)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, p := range []string{cpu, tr} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: want a written file, got %v, %v", p, fi, err)
		}
	}
	stop, err = bench.StartProfiles("", "")
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

// TestStartProfilesBadPath reports a file it cannot create, and its stop
// function is still safe to call.
func TestStartProfilesBadPath(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "f")
	for _, names := range [][2]string{{bad, ""}, {"", bad}} {
		stop, err := bench.StartProfiles(names[0], names[1])
		if err == nil {
			t.Errorf("StartProfiles(%q, %q): want an error", names[0], names[1])
		}
		stop()
	}
}
