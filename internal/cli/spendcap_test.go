package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/redistest"
)

// capPricing prices a completion token at a dollar and a prompt token at
// a millionth of one, with answers capped at 50 tokens: a call's
// worst-case reservation is about $50, whatever its prompt, and the
// simulator's answers (5 tokens) cost about $5. Agents' later turns go
// first (policy turns), so that the calls the cap affords finish agents
// rather than start new ones.
const capPricing = "max_tokens: 50\npricing: {input: 1, output: 1000000}\nlimits:\n  max_cost: 150\n  max_inflight: 4\n  policy: turns\n"

// TestRunStopsAtSpendCap: 50 agents of two model calls each against the
// HTTP simulator, with a $150 cap: calls start while the spent plus $50
// fits, about 20 of them: the run stops at the cap (spent ≤ cap + one call's cost), writes
// the finished results only, leaves the rest pending, and says so with
// exit status 1. Resumed under $200, the first run's spend counts (the
// cap is the whole job's) and it stops again. Run again with a far higher
// cap (not a changed job: the cap is no part of its fingerprint), it
// completes every input, and the server saw 100 calls in all: no input
// ran twice.
func TestRunStopsAtSpendCap(t *testing.T) {
	model, addr := startModelServer(t, 1)
	dir := t.TempDir()
	job, in := scaleJob(t, dir, addr, 50, "")
	appendTo(t, job, capPricing)
	out := filepath.Join(dir, "out.jsonl")

	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
	if code != 1 {
		t.Fatalf("capped run: exit %d, want 1; stderr:\n%s", code, stderr)
	}
	m := regexp.MustCompile(`stopped at the spend cap: \$([0-9.]+) spent of \$150\.0000; (\d+) inputs pending — resume with a higher limits\.max_cost`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not say the cap stopped the run:\n%s", stderr)
	}
	if !strings.Contains(stderr, "spend cap: stopped at the spend cap") || strings.Contains(stderr, "interrupted:") {
		t.Errorf("summary lacks the spend cap row, or calls the stopped agents interrupted:\n%s", stderr)
	}
	spent, _ := strconv.ParseFloat(m[1], 64)
	pending, _ := strconv.Atoi(m[2])
	if spent <= 0 || spent > 150+50.01 {
		t.Errorf("spent $%v under a $150 cap, want at most the cap plus one call ($50)", spent)
	}
	lines := readCostLines(t, readFileString(t, out))
	var linesCost float64
	for _, l := range lines {
		if l.Cost == nil {
			t.Fatalf("line %d has no cost", l.Index)
		}
		linesCost += *l.Cost
	}
	if linesCost > spent+0.0001 { // spent is printed to four decimals
		t.Errorf("the written lines cost $%v, more than the $%v spent", linesCost, spent)
	}
	for _, l := range readLines(t, readFileString(t, out)) {
		if l.Error != nil {
			t.Errorf("line %d failed (%s: %s): an agent stopped at the cap must not be written", l.Index, l.Error.Kind, l.Error.Message)
		}
	}
	if n := len(lines); n == 0 || n >= 50 || pending != 50-n {
		t.Fatalf("%d results written and %d pending of 50 inputs, want some of each, adding up", n, pending)
	}
	first := model.Stats().Requests
	t.Logf("capped run: $%.2f spent of $150, %d results written, %d pending, %d model calls", spent, len(lines), pending, first)
	if first >= 100 {
		t.Fatalf("the capped run made %d model calls, want fewer than the job's 100", first)
	}

	// A cap of $200 for the whole job: what the first run spent counts,
	// so the resume stops again after about $50 more.
	setCap(t, job, "max_cost: 150\n", "max_cost: 200\n")
	code, _, stderr = run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
	m = regexp.MustCompile(`stopped at the spend cap: \$([0-9.]+) spent of \$200\.0000`).FindStringSubmatch(stderr)
	if code != 1 || m == nil {
		t.Fatalf("resume with a $200 cap: exit %d, want 1 and the cap named; stderr:\n%s", code, stderr)
	}
	again, _ := strconv.ParseFloat(m[1], 64)
	second := model.Stats().Requests - first
	t.Logf("resumed under $200: $%.2f spent in all, %d more model calls", again, second)
	if again < spent || again > 200+50.01 || second == 0 || second > 20 {
		t.Errorf("resumed under $200: $%v spent in all after $%v, %d more calls; want the first run's spend counted (about 10 calls more)", again, spent, second)
	}

	// A higher cap: the job resumes and completes.
	setCap(t, job, "max_cost: 200\n", "max_cost: 1000000\n")
	code, _, stderr = run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
	if code != 0 {
		t.Fatalf("resume with a higher cap: exit %d, want 0; stderr:\n%s", code, stderr)
	}
	seen := map[int]bool{}
	for _, l := range readLines(t, readFileString(t, out)) {
		if l.Error != nil || seen[l.Index] {
			t.Errorf("line %d: error %v, seen before %v", l.Index, l.Error, seen[l.Index])
		}
		seen[l.Index] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d distinct results after the resume, want 50", len(seen))
	}
	t.Logf("after the resume: %d results, %d model calls in all", len(seen), model.Stats().Requests)
	if calls := model.Stats().Requests; calls != 100 {
		t.Errorf("the three runs made %d model calls (%d in the first), want 100: two per input, none twice", calls, first)
	}
}

// setCap replaces old with new in the job file at path.
func setCap(t *testing.T, path, old, new string) {
	t.Helper()
	text := readFileString(t, path)
	if !strings.Contains(text, old) {
		t.Fatalf("%s lacks %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(text, old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunSpendCapUnknownPrice: a cap on a model with no price is an error
// at the start, naming the model and the pricing key, before any call.
func TestRunSpendCapUnknownPrice(t *testing.T) {
	dir, job := newJob(t, "model: house-model-7\nlimits:\n  max_cost: 5\n")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", filepath.Join(dir, "out.jsonl"))
	if code != 2 || !strings.Contains(stderr, `"house-model-7"`) || !strings.Contains(stderr, "pricing:") || !strings.Contains(stderr, "limits.max_cost") {
		t.Errorf("exit %d, stderr %q; want 2 and an error naming the model, limits.max_cost and pricing:", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.jsonl")); err == nil || stdout != "" {
		t.Errorf("a refused job wrote results (stdout %q, out.jsonl %v)", stdout, err)
	}
}

// TestRunSpendCapOverRedis: 50 agents of two calls each through two
// worker processes and a coordinator, with the $150 cap of capPricing
// kept in Redis: the workers together stop at the cap (spent ≤ cap + one
// call's worst case per worker), the coordinator says so with exit status
// 1 and leaves the rest pending, and the results it wrote cost no more
// than the spend.
func TestRunSpendCapOverRedis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	_, addr := startModelServer(t, 1)
	dir := t.TempDir()
	job, in := scaleJob(t, dir, addr, 50, "")
	appendTo(t, job, capPricing)
	for i := range 2 {
		id := fmt.Sprintf("w%d", i+1)
		startProc(t, dir, id, "worker", "--redis", rs.URL, "--id", id, "--max-active", "8")
	}
	coord := startProc(t, dir, "coordinator", "run", job, "--inputs", in, "--out", "out.jsonl", "--redis", rs.URL, "--quiet")
	if code := coord.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("capped run over Redis: exit %d, want 1; stderr:\n%s", code, coord.stderr.String())
	}
	stderr := coord.stderr.String()
	m := regexp.MustCompile(`stopped at the spend cap: \$([0-9.]+) spent of \$150\.0000; (\d+) inputs pending`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not say the cap stopped the run:\n%s", stderr)
	}
	spent, _ := strconv.ParseFloat(m[1], 64)
	pending, _ := strconv.Atoi(m[2])
	if spent <= 0 || spent > 150+2*50.01 {
		t.Errorf("spent $%v under a $150 cap over 2 workers, want at most the cap plus one call ($50) per worker", spent)
	}
	lines := readCostLines(t, readFileString(t, filepath.Join(dir, "out.jsonl")))
	var linesCost float64
	for _, l := range lines {
		if l.Cost != nil {
			linesCost += *l.Cost
		}
	}
	t.Logf("over Redis: $%.4f spent of $150 by 2 workers, %d results, %d pending", spent, len(lines), pending)
	if linesCost > spent+0.0001 || pending <= 0 || len(lines)+pending != 50 {
		t.Errorf("%d results costing $%v, %d pending, $%v spent: want 50 in all, some pending, results within the spend", len(lines), linesCost, pending, spent)
	}
}
