package sink_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/sink"
	"github.com/google/go-cmp/cmp"
)

func result(i int) batchagent.Result {
	return batchagent.Result{Index: i, Input: batchagent.Input{"id": i}, Output: json.RawMessage(`{"v":1}`), Turns: 1, Attempts: 1}
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
	s := sink.NewJSONL(&buf, false)
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
	s := sink.NewJSONL(&buf, true)
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
	s := sink.NewJSONL(failWriter{}, false)
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
		s := sink.NewJSONL(&buf, ordered)
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
