package cli_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/redistest"
	"github.com/batchagent/batchagent/queue"
)

// TestRunSpendCapOverRedisResumes: a run over Redis stopped at its $150
// cap, started again with the cap raised to $1000, is the same run (the
// cap is no part of its identity): the coordinator resumes it, its spend
// ledger keeps the first start's dollars, the pending inputs complete on
// the same two worker processes, no input is written twice, the server
// sees two calls per input and no more, and the whole spend is within the
// higher cap.
func TestRunSpendCapOverRedisResumes(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	model, addr := startModelServer(t, 1)
	dir := t.TempDir()
	job, in := scaleJob(t, dir, addr, 50, "")
	appendTo(t, job, capPricing)
	for i := range 2 {
		id := "w" + strconv.Itoa(i+1)
		startProc(t, dir, id, "worker", "--redis", rs.URL, "--id", id, "--max-active", "8")
	}
	coord := startProc(t, dir, "coordinator", "run", job, "--inputs", in, "--out", "out.jsonl", "--redis", rs.URL, "--quiet")
	if code := coord.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("capped run over Redis: exit %d, want 1; stderr:\n%s", code, coord.stderr.String())
	}
	m := regexp.MustCompile(`stopped at the spend cap: \$([0-9.]+) spent of \$150\.0000; (\d+) inputs pending`).FindStringSubmatch(coord.stderr.String())
	if m == nil {
		t.Fatalf("stderr does not say the cap stopped the run:\n%s", coord.stderr.String())
	}
	spent, _ := strconv.ParseFloat(m[1], 64)
	pending, _ := strconv.Atoi(m[2])
	first := model.Stats().Requests
	t.Logf("capped at $150: $%.2f spent, %d pending, %d model calls", spent, pending, first)
	if pending <= 0 || first >= 100 {
		t.Fatalf("%d pending, %d model calls: want the cap to leave inputs pending", pending, first)
	}

	setCap(t, job, "max_cost: 150\n", "max_cost: 1000\n")
	coord = startProc(t, dir, "coordinator2", "run", job, "--inputs", in, "--out", "out.jsonl", "--redis", rs.URL)
	if code := coord.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("rerun with a $1000 cap: exit %d, want 0; stderr:\n%s", code, coord.stderr.String())
	}
	stderr := coord.stderr.String()
	idm := regexp.MustCompile(`run ([0-9a-f]{16}) on .*: resuming`).FindStringSubmatch(stderr)
	if idm == nil {
		t.Fatalf("the rerun with a higher cap did not resume the capped run:\n%s", stderr)
	}
	seen := map[int]bool{}
	var linesCost float64
	for _, l := range readCostLines(t, readFileString(t, filepath.Join(dir, "out.jsonl"))) {
		if seen[l.Index] {
			t.Errorf("input %d written twice", l.Index)
		}
		seen[l.Index] = true
		if l.Cost != nil {
			linesCost += *l.Cost
		}
	}
	if len(seen) != 50 {
		t.Errorf("%d distinct results after the rerun, want 50", len(seen))
	}
	if calls := model.Stats().Requests; calls != 100 {
		t.Errorf("the two starts made %d model calls (%d in the first), want 100: two per input, none twice", calls, first)
	}
	q, err := queue.Open(t.Context(), rs.URL, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	st, err := q.SpendLedger(idm[1]).State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the rerun: ledger %+v, results cost $%.2f", st, linesCost)
	if st.Spent < spent-0.0001 || st.Spent > 1000 || st.Limit != 1000 || st.Reached {
		t.Errorf("ledger %+v after the rerun: want the first start's $%v kept, at most $1000 spent in all, limit $1000, not reached", st, spent)
	}
	if linesCost > st.Spent+0.0001 || strings.Contains(stderr, "stopped at the spend cap") {
		t.Errorf("results cost $%v against $%v spent in the ledger; want within it, and no stop at the cap", linesCost, st.Spent)
	}
}
