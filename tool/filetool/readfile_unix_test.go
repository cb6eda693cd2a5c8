//go:build unix

package filetool_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/batchagent/batchagent/tool/filetool"
)

// A named pipe would block open(2) forever; read_file refuses it first.
func TestReadFileRefusesFIFO(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{root}})
	want := `path "pipe": not a regular file`
	if _, err := rf.Call(t.Context(), pathArgs("pipe")); err == nil || err.Error() != want {
		t.Errorf("read_file(pipe) error = %v, want %q", err, want)
	}
}
