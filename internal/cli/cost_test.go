package cli_test

import (
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// costLine is what a cost test reads of a result line.
type costLine struct {
	Index int       `json:"index"`
	Usage llm.Usage `json:"usage"`
	Cost  *float64  `json:"cost"`
}

func readCostLines(t *testing.T, text string) []costLine {
	t.Helper()
	var lines []costLine
	for s := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		var l costLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("output line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// TestRunReportsCost: against the HTTP simulator, with the job file's
// pricing, every line's cost is its server-reported usage at that price,
// and the summary's cost is their sum. The prices are a dollar or more a
// token, so the summary's four decimals hold the cost exactly.
func TestRunReportsCost(t *testing.T) {
	_, addr := startModelServer(t, 1)
	dir := t.TempDir()
	price := llm.Price{Input: 1e6, CachedInput: 5e5, Output: 2e6}
	job, in := scaleJob(t, dir, addr, 12, "")
	appendTo(t, job, "pricing: {input: 1000000, cached_input: 500000, output: 2000000}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := readCostLines(t, stdout)
	if len(lines) != 12 {
		t.Fatalf("got %d lines, want 12:\n%s", len(lines), stdout)
	}
	var sum float64
	var usage llm.Usage
	for _, l := range lines {
		if l.Usage.PromptTokens == 0 || l.Usage.CompletionTokens == 0 {
			t.Fatalf("line %d has usage %+v, want the server's tokens", l.Index, l.Usage)
		}
		want := float64(l.Usage.PromptTokens-l.Usage.CachedTokens)*1 + float64(l.Usage.CachedTokens)*0.5 + float64(l.Usage.CompletionTokens)*2
		if l.Cost == nil || !near(*l.Cost, want) {
			t.Errorf("line %d: cost %v, want %v for usage %+v", l.Index, l.Cost, want, l.Usage)
			continue
		}
		sum += *l.Cost
		usage = usage.Add(l.Usage)
	}
	m := regexp.MustCompile(`(?m)^ +cost: \$([0-9.]+) \(prices: file\)$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("summary has no cost line from the file's prices:\n%s", stderr)
	}
	got, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	if !near(got, sum) || !near(sum, price.Cost(usage)) {
		t.Errorf("summary cost %v, sum of the lines' costs %v, usage %+v at the price %v: want all equal", got, sum, usage, price.Cost(usage))
	}
}

// TestRunCostUnknown: a model with no price in the file or the table has
// no cost on its lines, and the summary says so.
func TestRunCostUnknown(t *testing.T) {
	_, addr := startModelServer(t, 0)
	job, in := scaleJob(t, t.TempDir(), addr, 3, "")
	appendTo(t, job, "model: no-such-model-cost-test\n") // named by no other test: the warning is once per process
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := readCostLines(t, stdout)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		if l.Cost != nil {
			t.Errorf("line %d has cost %v, want none: the price is unknown", l.Index, *l.Cost)
		}
	}
	if want := " cost: unknown (no price for model no-such-model-cost-test)\n"; !strings.Contains(stderr, want) {
		t.Errorf("summary lacks %q:\n%s", want, stderr)
	}
	if n := strings.Count(stderr, "no known price for model"); n != 1 || !strings.Contains(stderr, "model=no-such-model-cost-test") {
		t.Errorf("stderr warns of the unknown price %d times, want once, naming the model:\n%s", n, stderr)
	}
}

// appendTo appends text to the file at path.
func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// near reports whether a and b agree to a relative 1e-9.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
