package filetool_test

import (
	"os"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/tool/filetool"
)

// TestReadFileGrownSinceStat reads a file of /proc, which Stat reports as
// empty but which has content: read_file reads on past the size Stat gave,
// up to one byte past MaxBytes.
func TestReadFileGrownSinceStat(t *testing.T) {
	if info, err := os.Stat("/proc/self/status"); err != nil || info.Size() != 0 || !info.Mode().IsRegular() {
		t.Skipf("/proc/self/status is not an empty-looking regular file: %v, %v", info, err)
	}
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{"/proc/self"}})
	if got, err := rf.Call(t.Context(), pathArgs("status")); err != nil || !strings.HasPrefix(got, "Name:\t") || !strings.Contains(got, "\nPid:\t") {
		t.Errorf("read_file(status) = %q, %v, want the process status, nil", got, err)
	}
	small := newReadFile(t, filetool.ReadFileConfig{Roots: []string{"/proc/self"}, MaxBytes: 100})
	want := `path "status": file is 101 bytes, over the limit of 100 bytes`
	if _, err := small.Call(t.Context(), pathArgs("status")); err == nil || err.Error() != want {
		t.Errorf("read_file(status) with MaxBytes 100 error = %v, want %q", err, want)
	}
}
