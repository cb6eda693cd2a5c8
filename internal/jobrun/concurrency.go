package jobrun

import (
	"fmt"

	"github.com/batchagent/batchagent"
)

// concurrencyLine renders the limit on model calls in flight: fixed or
// adaptive (where it started, its range, where it ended), and its source.
func concurrencyLine(st batchagent.Stats, source string) string {
	h := st.LimitHistory
	switch {
	case st.Limit == 0:
		return fmt.Sprintf("unlimited (%s)", source)
	case len(h) == 0:
		return fmt.Sprintf("fixed %d (%s)", st.Limit, source)
	}
	lo, hi := h[0].Limit, h[0].Limit
	for _, c := range h {
		lo, hi = min(lo, c.Limit), max(hi, c.Limit)
	}
	s := fmt.Sprintf("adaptive, start %d", h[0].Limit)
	if len(h) > 1 {
		s += fmt.Sprintf(", range %d..%d over %d changes, end %d", lo, hi, len(h)-1, h[len(h)-1].Limit)
	}
	return s + fmt.Sprintf(" (%s)", source)
}
