package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// Bounds of the results table a report embeds: however large the run,
// the page holds at most MaxRows rows (the failures first, up to
// MaxFailureRows, then successes sampled evenly by index), each cell at
// most MaxCellBytes of text, and at most MaxResultsBytes of rows in all.
const (
	MaxRows         = 5000
	MaxFailureRows  = 2500
	MaxCellBytes    = 1024
	MaxResultsBytes = 3 << 20
)

// MaxLiveRows is how many of the latest results, and of the latest
// failures, the live view keeps for its results table.
const MaxLiveRows = 200

// Row is one result of the results table: its input, output and error
// as text (each cut at MaxCellBytes, with "…"), its turns, tokens and
// cost.
type Row struct {
	// Index is the agent's position in the inputs.
	Index int `json:"i"`
	// Status is "done", "failed" or "running".
	Status string `json:"s"`
	// Kind is a failed agent's error kind; "" otherwise.
	Kind string `json:"k,omitempty"`
	// Error is a failed agent's error: its step and message.
	Error string `json:"e,omitempty"`
	// Input is the agent's input as JSON.
	Input string `json:"in"`
	// Output is the agent's output as JSON; "" for none.
	Output string `json:"out,omitempty"`
	// Turns counts the agent's model turns.
	Turns int `json:"t"`
	// Tokens counts the tokens of the agent's model calls.
	Tokens int64 `json:"tok"`
	// Media counts the part of Tokens that is media (images, audio,
	// documents); absent for a text-only agent.
	Media int64 `json:"med,omitempty"`
	// Cost is what the agent's tokens cost; -1 when the price is unknown.
	Cost float64 `json:"c"`
}

// Results is the results table of a run: the rows a page shows, and how
// they were chosen from all of the run's.
type Results struct {
	// Rows are the rows shown: the failures first, then the others, each
	// group by index.
	Rows []Row `json:"rows"`
	// Total counts the run's results (agents with a state); Failed the
	// failed among them.
	Total  int64 `json:"total"`
	Failed int64 `json:"failed"`
	// Chosen says how Rows were chosen from the run's results, e.g. "all
	// 120 results" or "all 3,000 failures, then 2,000 of 997,000 other
	// results sampled evenly by index".
	Chosen string `json:"chosen"`
}

// cut returns s cut to at most n bytes at a rune boundary, with "…"
// appended when it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// inputText returns in as compact JSON (its keys sorted), cut.
func inputText(in job.Input) string {
	if len(in) == 0 {
		return ""
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Sprintf("(input not encodable as JSON: %v)", err)
	}
	return cut(string(b), MaxCellBytes)
}

// failureText returns the step and message of a saved failure.
func failureText(f *job.Failure) string {
	if f == nil {
		return ""
	}
	msg := ""
	if len(f.Cause) > 0 {
		msg = f.Cause[0].Message
	}
	if f.Op != "" {
		msg = f.Op + ": " + msg
	}
	return cut(msg, MaxCellBytes)
}

// costOf returns the cost of u at price p; -1 when p is nil.
func costOf(p *llm.Price, u llm.Usage) float64 {
	if p == nil {
		return -1
	}
	return p.Cost(u)
}

// rowOfState returns the row of a stored state.
func rowOfState(st *agent.State, price *llm.Price) Row {
	r := Row{Index: st.Index, Status: string(st.Status), Kind: kindOf(st), Error: failureText(st.Failure),
		Input: inputText(st.Input), Turns: st.Turns, Tokens: st.Usage.Total(), Media: st.Usage.MediaTokens, Cost: costOf(price, st.Usage)}
	if st.Status == agent.StatusDone {
		r.Output = cut(string(st.Output), MaxCellBytes)
	}
	if r.Status == "" {
		r.Status = string(agent.StatusRunning)
	}
	return r
}

// rowOfResult returns the row of a result as the engine hands it over.
func rowOfResult(r *batchagent.Result, price *llm.Price) Row {
	row := Row{Index: r.Index, Status: "done", Input: inputText(r.Input), Turns: r.Turns,
		Tokens: r.Usage.Total(), Media: r.Usage.MediaTokens, Cost: costOf(price, r.Usage)}
	if r.Err != nil {
		row.Status, row.Kind = "failed", string(job.KindOf(r.Err))
		msg := r.Err.Error()
		if ae, ok := errors.AsType[*job.AgentError](r.Err); ok && ae.Err != nil {
			msg = ae.Op + ": " + ae.Err.Error() // as failureText: the step and the cause
		}
		row.Error = cut(msg, MaxCellBytes)
	} else {
		row.Output = cut(string(r.Output), MaxCellBytes)
	}
	return row
}

// rowSize estimates the bytes a row takes in the page.
func rowSize(r *Row) int {
	return 64 + len(r.Input) + len(r.Output) + len(r.Error) + len(r.Kind)
}

// resultsOfStates chooses the rows of a report from the states of a run
// (ordered by index): every failure up to MaxFailureRows, then the other
// states sampled evenly by index, within MaxRows and MaxResultsBytes.
func resultsOfStates(states []agent.State, price *llm.Price) *Results {
	var failed, others []int // positions in states
	for i := range states {
		if states[i].Status == agent.StatusFailed {
			failed = append(failed, i)
		} else {
			others = append(others, i)
		}
	}
	res := &Results{Total: int64(len(states)), Failed: int64(len(failed))}
	budget := MaxResultsBytes
	nf := 0
	for _, i := range failed[:min(len(failed), MaxFailureRows)] {
		r := rowOfState(&states[i], price)
		if budget-rowSize(&r) < MaxResultsBytes/4 && nf > 0 {
			break // keep a quarter of the budget for the successes
		}
		budget -= rowSize(&r)
		res.Rows = append(res.Rows, r)
		nf++
	}
	// The others: n sampled evenly, n shrunk until their rows fit.
	n := min(len(others), MaxRows-nf)
	var rows []Row
	for n > 0 {
		rows = rows[:0]
		size := 0
		for k := range n {
			r := rowOfState(&states[others[k*len(others)/n]], price)
			size += rowSize(&r)
			rows = append(rows, r)
		}
		if size <= budget {
			break
		}
		n = n * budget / size * 9 / 10
	}
	if n == 0 {
		rows = nil
	}
	res.Rows = append(res.Rows, rows...)
	res.Chosen = chosenText(len(states), len(failed), nf, len(others), len(rows))
	return res
}

// chosenText says which rows of a run's results a page shows.
func chosenText(total, failed, shownFailed, others, shownOthers int) string {
	if shownFailed == failed && shownOthers == others {
		return fmt.Sprintf("all %s results", fmtCount(total))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s results: ", fmtCount(shownFailed+shownOthers), fmtCount(total))
	if shownFailed == failed {
		fmt.Fprintf(&b, "all %s failures", fmtCount(failed))
	} else {
		fmt.Fprintf(&b, "the first %s of %s failures by index", fmtCount(shownFailed), fmtCount(failed))
	}
	if shownOthers == others {
		fmt.Fprintf(&b, ", then all %s other results", fmtCount(others))
	} else {
		fmt.Fprintf(&b, ", then %s of %s other results sampled evenly by index", fmtCount(shownOthers), fmtCount(others))
	}
	return b.String()
}

// fmtCount formats n with thousands separators: 1,000,000.
func fmtCount(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + fmtCount(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// recent keeps the latest results of a live run, and apart from them its
// latest failures, for the live view's results table. It is safe for
// concurrent use.
type recent struct {
	price *llm.Price

	mu sync.Mutex // protects the fields below
	// latest and failures are rings of at most MaxLiveRows rows; next and
	// nextFailure are where the next row goes.
	latest, failures  []Row
	next, nextFailure int
	total, failed     int64
}

// add records a result.
func (rc *recent) add(r *batchagent.Result) {
	row := rowOfResult(r, rc.price)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.total++
	ring, next := &rc.latest, &rc.next
	if row.Status == "failed" {
		rc.failed++
		ring, next = &rc.failures, &rc.nextFailure
	}
	if len(*ring) < MaxLiveRows {
		*ring = append(*ring, row)
		return
	}
	(*ring)[*next] = row
	*next = (*next + 1) % MaxLiveRows
}

// results returns the rows kept: the failures, then the other latest
// results, each newest first.
func (rc *recent) results() *Results {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	res := &Results{Total: rc.total, Failed: rc.failed, Rows: make([]Row, 0, len(rc.failures)+len(rc.latest))}
	newest := func(ring []Row, next int) {
		for k := range ring {
			res.Rows = append(res.Rows, ring[(next-1-k+2*len(ring))%len(ring)])
		}
	}
	newest(rc.failures, rc.nextFailure)
	newest(rc.latest, rc.next)
	res.Chosen = fmt.Sprintf("the latest %s failures and the latest %s other results, newest first, of %s so far",
		fmtCount(len(rc.failures)), fmtCount(len(rc.latest)), fmtCount(int(rc.total)))
	return res
}
