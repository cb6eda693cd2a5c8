package cli

import (
	"errors"
	"testing"
)

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// TestRunnerCloseLabelsErrors checks that close closes everything once and
// labels each error with what failed to close.
func TestRunnerCloseLabelsErrors(t *testing.T) {
	closed := 0
	ok := closeFunc(func() error { closed++; return nil })
	fail := func(msg string) closeFunc {
		return func() error { closed++; return errors.New(msg) }
	}
	r := &runner{closers: []namedCloser{{"inputs", ok}, {"state", fail("commit failed")}, {"output", fail("quota exceeded")}}}
	err := r.close()
	if want := "state: commit failed\noutput: quota exceeded"; err == nil || err.Error() != want {
		t.Errorf("close() = %v, want %q", err, want)
	}
	if err := r.close(); err != nil || closed != 3 {
		t.Errorf("second close() = %v after %d closes, want nil after 3", err, closed)
	}
}
