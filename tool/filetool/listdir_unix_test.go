//go:build unix

package filetool_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/batchagent/batchagent/tool/filetool"
)

// Names that would break the one-entry-per-line format are quoted, and
// special files are listed by kind without being opened.
func TestListDirOddEntries(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, name := range []string{"two\nlines -> (symlink)", "tab\there", "bad\xffutf8"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("abc"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{root}})
	got, err := ld.Call(t.Context(), json.RawMessage(`{}`))
	want := `"bad\xffutf8"  3 bytes` + "\n" +
		"pipe  (named pipe)\n" +
		`"tab\there"  3 bytes` + "\n" +
		`"two\nlines -> (symlink)"  3 bytes`
	if err != nil || got != want {
		t.Errorf("list_dir() = %q, %v, want %q, nil", got, err, want)
	}
}

// A directory the process may not read is refused with a clear error.
func TestListDirPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may read any directory")
	}
	root := t.TempDir()
	locked := filepath.Join(root, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{root}})
	want := `path "locked": permission denied`
	if got, err := ld.Call(t.Context(), pathArgs("locked")); err == nil || err.Error() != want {
		t.Errorf("list_dir(locked) = %q, %v, want error %q", got, err, want)
	}
}
