package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// states returns n finished states, those whose index failed says failed
// (kind timeout), each input text of size bytes.
func states(n, size int, failed func(int) bool) []agent.State {
	out := make([]agent.State, n)
	for i := range out {
		out[i] = agent.State{Index: i, Status: agent.StatusDone, Turns: 1, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2},
			Input: job.Input{"text": strings.Repeat("x", size)}, Output: json.RawMessage(`{"ok":true}`)}
		if failed(i) {
			out[i].Status, out[i].Output = agent.StatusFailed, nil
			out[i].Failure = &job.Failure{Kind: job.KindTimeout, Op: "generate", Cause: []job.Link{{Message: "deadline exceeded"}}}
		}
	}
	return out
}

func TestResultsOfStates(t *testing.T) {
	t.Parallel()
	price := &llm.Price{Input: 1, Output: 2}
	tests := []struct {
		name             string
		n, size          int
		failed           func(int) bool
		rows, failedRows int
		chosen           string
	}{
		{"all", 10, 10, func(i int) bool { return i == 3 }, 10, 1, "all 10 results"},
		{"sampled", 20_000, 10, func(i int) bool { return i%10 == 0 }, MaxRows, 2000,
			"5,000 of 20,000 results: all 2,000 failures, then 3,000 of 18,000 other results sampled evenly by index"},
		{"failures capped", 20_000, 10, func(i int) bool { return i%2 == 0 }, MaxRows, MaxFailureRows,
			"5,000 of 20,000 results: the first 2,500 of 10,000 failures by index, then 2,500 of 10,000 other results sampled evenly by index"},
		// Inputs of 5 KB are cut at MaxCellBytes: the byte budget, not
		// MaxRows, bounds the rows.
		{"bytes bounded", 20_000, 5000, func(int) bool { return false }, -1, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := resultsOfStates(states(tt.n, tt.size, tt.failed), price)
			size, nf := 0, 0
			for i, r := range res.Rows {
				size += len(r.Input) + len(r.Output) + len(r.Error)
				if len(r.Input) > MaxCellBytes+len("…") {
					t.Fatalf("row %d's input is %d bytes, want at most %d", i, len(r.Input), MaxCellBytes+len("…"))
				}
				if r.Status == "failed" {
					nf++
					if i > 0 && res.Rows[i-1].Status != "failed" {
						t.Fatalf("row %d is a failure after a success: failures come first", i)
					}
					if r.Error != "generate: deadline exceeded" || r.Kind != "timeout" {
						t.Fatalf("row %d: error %q kind %q, want %q timeout", i, r.Error, r.Kind, "generate: deadline exceeded")
					}
				}
				if want := price.Cost(llm.Usage{PromptTokens: 10, CompletionTokens: 2}); r.Cost != want || r.Tokens != 12 {
					t.Fatalf("row %d: cost %v tokens %d, want %v 12", i, r.Cost, r.Tokens, want)
				}
			}
			if size > MaxResultsBytes {
				t.Errorf("the rows hold %d bytes of text, want at most %d", size, MaxResultsBytes)
			}
			if tt.rows >= 0 && (len(res.Rows) != tt.rows || nf != tt.failedRows || res.Chosen != tt.chosen) {
				t.Errorf("resultsOfStates: %d rows, %d failed, %q; want %d, %d, %q", len(res.Rows), nf, res.Chosen, tt.rows, tt.failedRows, tt.chosen)
			}
			if tt.rows < 0 && (len(res.Rows) == 0 || len(res.Rows) >= MaxRows || !strings.Contains(res.Chosen, "sampled evenly")) {
				t.Errorf("resultsOfStates of large inputs: %d rows, %q; want fewer than %d, sampled", len(res.Rows), res.Chosen, MaxRows)
			}
			// Sampled evenly: the indexes of the successes step alike.
			if tt.rows >= 0 && tt.rows < tt.n {
				ok := res.Rows[nf:]
				step := ok[1].Index - ok[0].Index
				if last := ok[len(ok)-1].Index; last < tt.n-2*step-10 {
					t.Errorf("the sample ends at index %d of %d: not spread evenly", last, tt.n)
				}
			}
		})
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"日本語", 4, "日…"}, // never half a rune
		{"", 0, ""},
	} {
		if got := cut(tt.in, tt.n); got != tt.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestRecentKeepsLatestAndFailures(t *testing.T) {
	t.Parallel()
	rc := &recent{}
	for i := range 3 * MaxLiveRows {
		r := batchagent.Result{Index: i, Input: job.Input{"i": i}, Output: json.RawMessage(`{}`)}
		if i%7 == 0 {
			r.Output, r.Err = nil, &job.AgentError{Agent: i, Op: "tool", Err: errors.New("boom")}
		}
		rc.add(&r)
	}
	res := rc.results()
	if res.Total != 3*MaxLiveRows || res.Failed != int64((3*MaxLiveRows+6)/7) {
		t.Fatalf("results: total %d failed %d, want %d %d", res.Total, res.Failed, 3*MaxLiveRows, (3*MaxLiveRows+6)/7)
	}
	nf := int(res.Failed)
	if len(res.Rows) != nf+MaxLiveRows {
		t.Fatalf("%d rows, want %d failures and %d others", len(res.Rows), nf, MaxLiveRows)
	}
	// Newest first: the last failure, then the last success.
	lastFail := (3*MaxLiveRows - 1) / 7 * 7
	if r := res.Rows[0]; r.Index != lastFail || r.Status != "failed" || !strings.Contains(r.Error, "boom") {
		t.Errorf("first row %+v, want the failure of agent %d", r, lastFail)
	}
	if r := res.Rows[nf]; r.Index != 3*MaxLiveRows-1 || r.Status != "done" {
		t.Errorf("first success row %+v, want agent %d", r, 3*MaxLiveRows-1)
	}
	if r := res.Rows[len(res.Rows)-1]; r.Index >= 2*MaxLiveRows {
		t.Errorf("the oldest row kept is agent %d, want one of the last %d", r.Index, MaxLiveRows)
	}
	if want := fmt.Sprintf("the latest %d failures", nf); !strings.HasPrefix(res.Chosen, want) {
		t.Errorf("Chosen = %q, want it to start %q", res.Chosen, want)
	}
}
