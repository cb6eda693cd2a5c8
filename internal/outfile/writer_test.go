package outfile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/google/go-cmp/cmp"
)

func result(i int) batchagent.Result {
	return batchagent.Result{Index: i, Input: batchagent.Input{"id": i}, Output: json.RawMessage(`{"v":1}`), Turns: 1, ModelCalls: 1}
}

func indexes(t *testing.T, out string) []int {
	t.Helper()
	var got []int
	for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
		var v struct{ Index int }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		got = append(got, v.Index)
	}
	return got
}

func TestCompletionOrder(t *testing.T) {
	var buf bytes.Buffer
	s := outfile.NewWriter(&buf, false)
	for _, i := range []int{2, 0, 1} {
		if err := s.Write(result(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 0, 1}, indexes(t, buf.String())); diff != "" {
		t.Errorf("line order (-want +got):\n%s", diff)
	}
	if s.Written() != 3 {
		t.Errorf("Written() = %d, want 3", s.Written())
	}
}

func TestOrdered(t *testing.T) {
	var buf bytes.Buffer
	s := outfile.NewWriter(&buf, true)
	for _, i := range []int{3, 1, 0, 5} {
		if err := s.Write(result(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 1}, indexes(t, buf.String())); diff != "" {
		t.Errorf("before the gap fills (-want +got):\n%s", diff)
	}
	// 2 and 4 never come (a cancelled run): Close writes the rest in order.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 1, 3, 5}, indexes(t, buf.String())); diff != "" {
		t.Errorf("after Close (-want +got):\n%s", diff)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorIsSticky(t *testing.T) {
	s := outfile.NewWriter(failWriter{}, false)
	_ = s.Write(result(0))
	err := s.Close()
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Close() = %v, want the write error", err)
	}
	if err := s.Write(result(1)); err == nil {
		t.Errorf("Write after a failure = nil, want the first error")
	}
}

func TestSkipResumed(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		var buf bytes.Buffer
		s := outfile.NewWriter(&buf, ordered)
		s.Skip(map[int]bool{0: true, 2: true})
		for _, i := range []int{3, 2, 1, 0, 4} {
			if err := s.Write(result(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		want := []int{3, 1, 4}
		if ordered {
			want = []int{1, 3, 4}
		}
		if diff := cmp.Diff(want, indexes(t, buf.String())); diff != "" {
			t.Errorf("ordered=%v: lines (-want +got):\n%s", ordered, diff)
		}
	}
}

// lockedWriter is a writer safe to read while the writer's timer writes.
type lockedWriter struct {
	mu     sync.Mutex // protects buf and writes
	buf    bytes.Buffer
	writes int
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

// lines returns the indexes of the lines written so far, and the number of
// writes they took.
func (w *lockedWriter) lines(t *testing.T) ([]int, int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() == 0 {
		return nil, w.writes
	}
	return indexes(t, w.buf.String()), w.writes
}

// TestFlushesWithoutFurtherWrites checks that a line reaches the writer
// 100ms after it is written although nothing else happens, as in the quiet
// tail of a run with no progress reporter, and that Close stops the timer.
func TestFlushesWithoutFurtherWrites(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var w lockedWriter
				s := outfile.NewWriter(&w, ordered)
				for _, i := range []int{0, 1} {
					if err := s.Write(result(i)); err != nil {
						t.Fatal(err)
					}
					time.Sleep(30 * time.Millisecond)
				}
				synctest.Wait()
				if got, _ := w.lines(t); got != nil {
					t.Fatalf("lines 60ms after the first write = %v, want none yet (buffered)", got)
				}
				time.Sleep(40 * time.Millisecond) // 100ms after the first write
				synctest.Wait()
				got, writes := w.lines(t)
				if diff := cmp.Diff([]int{0, 1}, got); diff != "" || writes != 1 {
					t.Fatalf("100ms after the first write: %d writes, lines (-want +got):\n%s", writes, diff)
				}
				// A later line arms the timer again; Close flushes it at
				// once and stops the timer.
				if err := s.Write(result(2)); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				got, writes = w.lines(t)
				if diff := cmp.Diff([]int{0, 1, 2}, got); diff != "" || writes != 2 {
					t.Errorf("after Close: %d writes, want 2; lines (-want +got):\n%s", writes, diff)
				}
				if err := s.Write(result(3)); !errors.Is(err, outfile.ErrClosed) {
					t.Errorf("Write after Close = %v, want %v", err, outfile.ErrClosed)
				}
			})
		})
	}
}
