package estimate

import (
	"slices"
	"testing"
)

// TestSampleIndices: k of n ordinals, evenly spread, all of them when k
// is n or more.
func TestSampleIndices(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want []int
	}{
		{10, 1, []int{5}},
		{10, 2, []int{2, 7}},
		{4, 4, []int{0, 1, 2, 3}},
		{3, 5, []int{0, 1, 2}},
	} {
		if got := sampleIndices(tc.n, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("sampleIndices(%d, %d) = %v, want %v", tc.n, tc.k, got, tc.want)
		}
	}
}
