package groupcommit_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/batchagent/batchagent/internal/groupcommit"
)

// TestGroupsFormWhileACommitRuns: items added while a group commits form
// the next group, capped at MaxGroup, committed in order; each adder's
// group tells its commit's error, and Done sees every item.
func TestGroupsFormWhileACommitRuns(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var groups [][]int
	var done []int
	boom := errors.New("boom")
	w := groupcommit.Start(groupcommit.Config[int]{
		MaxGroup: 4,
		Commit: func(items []int) error {
			if len(groups) == 0 {
				close(started)
				<-release // the first commit runs while the others queue
			}
			groups = append(groups, slices.Clone(items))
			if items[0] == 5 {
				return boom
			}
			return nil
		},
		Done: func(items []int, err error) {
			for _, it := range items {
				if (err != nil) != (it >= 5 && it <= 8) {
					t.Errorf("item %d done with %v", it, err)
				}
				done = append(done, it)
			}
		},
	})
	first, err := w.Add(0)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	var gs []*groupcommit.Group[int]
	for i := 1; i <= 10; i++ {
		g, err := w.Add(i)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	close(release)
	<-first.Done()
	for i, g := range gs {
		<-g.Done()
		if want := i+1 >= 5 && i+1 <= 8; (g.Err() != nil) != want {
			t.Errorf("item %d: group error %v", i+1, g.Err())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0}, {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}}
	if !slices.EqualFunc(groups, want, slices.Equal) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	if !slices.Equal(done, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("done %v", done)
	}
}

// TestCloseCommitsWhatWaits: Close commits the groups queued, then Add
// and a second Close return ErrClosed.
func TestCloseCommitsWhatWaits(t *testing.T) {
	var mu sync.Mutex
	var got []int
	release := make(chan struct{})
	w := groupcommit.Start(groupcommit.Config[int]{MaxGroup: 100, Commit: func(items []int) error {
		<-release
		mu.Lock()
		defer mu.Unlock()
		got = append(got, items...)
		return nil
	}})
	for i := range 5 {
		if _, err := w.Add(i); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error)
	go func() { closed <- w.Close() }()
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("committed %v, want 0-4", got)
	}
	if !w.Closed() {
		t.Fatal("Closed() = false after Close")
	}
	if _, err := w.Add(5); !errors.Is(err, groupcommit.ErrClosed) {
		t.Fatalf("Add after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(); !errors.Is(err, groupcommit.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}
