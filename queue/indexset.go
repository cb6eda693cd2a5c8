package queue

import (
	"math/bits"
	"slices"
)

// IndexSet is a set of input indexes, one bit each: a run of millions of
// inputs keeps its "written" and "seen" sets in a few hundred kilobytes.
// The zero value is an empty set. It is not safe for concurrent use.
type IndexSet struct {
	words []uint64
	n     int // indexes in the set
}

// Add adds i (from 0) and reports whether it was not in the set before.
func (s *IndexSet) Add(i int) bool {
	w := i / 64
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	bit := uint64(1) << (i % 64)
	if s.words[w]&bit != 0 {
		return false
	}
	s.words[w] |= bit
	s.n++
	return true
}

// Has reports whether i is in the set.
func (s *IndexSet) Has(i int) bool {
	w := i / 64
	return i >= 0 && w < len(s.words) && s.words[w]&(uint64(1)<<(i%64)) != 0
}

// Clone returns a copy of s that shares nothing with it.
func (s *IndexSet) Clone() *IndexSet {
	return &IndexSet{words: slices.Clone(s.words), n: s.n}
}

// Len returns the number of indexes in the set.
func (s *IndexSet) Len() int { return s.n }

// CountBelow returns the number of indexes in the set below n.
func (s *IndexSet) CountBelow(n int) int {
	k := 0
	for w, word := range s.words {
		switch {
		case (w+1)*64 <= n:
			k += bits.OnesCount64(word)
		case w*64 < n:
			k += bits.OnesCount64(word & (uint64(1)<<(n-w*64) - 1))
		}
	}
	return k
}
