package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/checkpoint"
)

// TestSaveFailsWhenFileGone deletes, or replaces, the store's file while
// it is open: the next saves fail with ErrFileGone naming the path, rather
// than committing to a file no path names any more, lost with the process.
func TestSaveFailsWhenFileGone(t *testing.T) {
	tests := []struct {
		name string
		gone func(t *testing.T, path string)
		want string
	}{
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "no longer exists"},
		{"renamed away", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".moved"); err != nil {
				t.Fatal(err)
			}
		}, "no longer exists"},
		{"replaced", func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "other")
			if err := os.WriteFile(other, []byte("not a state file"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, "is another file now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.db")
			s, err := checkpoint.Open(path, checkpoint.Config{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			before := fullState("j", 0)
			if err := s.Save(ctx, before); err != nil {
				t.Fatalf("Save before = %v", err)
			}
			tt.gone(t, path)
			for i := 1; i <= 2; i++ { // the first failure sticks
				err := s.Save(ctx, fullState("j", i))
				if !errors.Is(err, checkpoint.ErrFileGone) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Save %d after the file was %s = %v, want ErrFileGone naming %s and %q", i, tt.name, err, path, tt.want)
				}
			}
			done := make(chan error, 1) // SaveAsync calls done once
			st := fullState("j", 3)
			s.SaveAsync(&st, func(err error) { done <- err })
			if err := <-done; !errors.Is(err, checkpoint.ErrFileGone) {
				t.Errorf("SaveAsync after the file was %s: done(%v), want ErrFileGone", tt.name, err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
		})
	}
}
