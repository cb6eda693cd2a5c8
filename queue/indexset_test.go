package queue_test

import (
	"testing"

	"github.com/batchagent/batchagent/queue"
)

// TestIndexSet: Add reports new indexes only, Has and Len agree with a
// map, and CountBelow counts across word boundaries.
func TestIndexSet(t *testing.T) {
	var s queue.IndexSet
	want := map[int]bool{}
	for _, i := range []int{0, 5, 63, 64, 65, 127, 128, 1000, 5, 64, 1000} {
		if got := s.Add(i); got == want[i] {
			t.Errorf("Add(%d) = %v, want %v", i, got, !want[i])
		}
		want[i] = true
	}
	if s.Len() != len(want) {
		t.Errorf("len = %d, want %d", s.Len(), len(want))
	}
	for i := -1; i < 1100; i++ {
		if s.Has(i) != want[i] {
			t.Errorf("Has(%d) = %v, want %v", i, s.Has(i), want[i])
		}
	}
	for _, n := range []int{0, 1, 6, 63, 64, 65, 66, 128, 129, 1000, 1001, 5000} {
		k := 0
		for i := range want {
			if i < n {
				k++
			}
		}
		if got := s.CountBelow(n); got != k {
			t.Errorf("CountBelow(%d) = %d, want %d", n, got, k)
		}
	}
}

// TestIndexSetClone: a clone holds what the set held and shares nothing
// with it afterwards.
func TestIndexSetClone(t *testing.T) {
	var s queue.IndexSet
	s.Add(3)
	s.Add(70)
	c := s.Clone()
	s.Add(5)
	c.Add(200)
	if !c.Has(3) || !c.Has(70) || c.Has(5) || c.Len() != 3 {
		t.Errorf("clone has 3 %v, 70 %v, 5 %v, len %d; want true, true, false, 3", c.Has(3), c.Has(70), c.Has(5), c.Len())
	}
	if s.Has(200) || s.Len() != 3 {
		t.Errorf("set after the clone's Add: has 200 %v, len %d; want false, 3", s.Has(200), s.Len())
	}
}
