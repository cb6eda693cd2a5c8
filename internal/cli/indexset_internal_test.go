package cli

import "testing"

// TestIndexSet: add reports new indexes only, has and len agree with a
// map, and countBelow counts across word boundaries.
func TestIndexSet(t *testing.T) {
	var s indexSet
	want := map[int]bool{}
	for _, i := range []int{0, 5, 63, 64, 65, 127, 128, 1000, 5, 64, 1000} {
		if got := s.add(i); got == want[i] {
			t.Errorf("add(%d) = %v, want %v", i, got, !want[i])
		}
		want[i] = true
	}
	if s.len() != len(want) {
		t.Errorf("len = %d, want %d", s.len(), len(want))
	}
	for i := -1; i < 1100; i++ {
		if s.has(i) != want[i] {
			t.Errorf("has(%d) = %v, want %v", i, s.has(i), want[i])
		}
	}
	for _, n := range []int{0, 1, 6, 63, 64, 65, 66, 128, 129, 1000, 1001, 5000} {
		k := 0
		for i := range want {
			if i < n {
				k++
			}
		}
		if got := s.countBelow(n); got != k {
			t.Errorf("countBelow(%d) = %d, want %d", n, got, k)
		}
	}
}

// TestIndexSetClone: a clone holds what the set held and shares nothing
// with it afterwards.
func TestIndexSetClone(t *testing.T) {
	var s indexSet
	s.add(3)
	s.add(70)
	c := s.clone()
	s.add(5)
	c.add(200)
	if !c.has(3) || !c.has(70) || c.has(5) || c.len() != 3 {
		t.Errorf("clone has 3 %v, 70 %v, 5 %v, len %d; want true, true, false, 3", c.has(3), c.has(70), c.has(5), c.len())
	}
	if s.has(200) || s.len() != 3 {
		t.Errorf("set after the clone's add: has 200 %v, len %d; want false, 3", s.has(200), s.len())
	}
}
