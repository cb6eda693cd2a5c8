package outfile

import (
	"io"

	"github.com/batchagent/batchagent/agent"
)

// Export writes `batchagent export` to w: the result line of each
// finished state of job, in the order of states (the store loads them by
// index), as a run writes them. It returns the lines written and the
// agents still running, which it skips, and the first error met writing
// or flushing; the caller closes w.
func Export(w io.Writer, job string, states []agent.State) (written, unfinished int, err error) {
	js := NewWriter(w, false)
	for _, st := range states {
		if st.Status == agent.StatusRunning {
			unfinished++
			continue
		}
		if err = js.Write(st.Result(job)); err != nil {
			break
		}
	}
	if cerr := js.Close(); err == nil {
		err = cerr
	}
	return js.Written(), unfinished, err
}
