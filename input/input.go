package input

import (
	"iter"

	"github.com/batchagent/batchagent/job"
)

// Error reports an input row that could not be read or decoded; see
// [job.InputError].
type Error = job.InputError

// Slice adapts in to the sequence shape of [JSONL] and [CSV]. It never yields
// an error. The slice is not copied: the caller must not modify it while the
// sequence is being consumed. The sequence may be iterated more than once.
func Slice(in []job.Input) iter.Seq2[job.Input, error] {
	return func(yield func(job.Input, error) bool) {
		for _, x := range in {
			if !yield(x, nil) {
				return
			}
		}
	}
}
