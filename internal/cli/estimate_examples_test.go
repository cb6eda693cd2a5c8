package cli_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// exampleJob is a job a newcomer runs on the simulator: a directory
// holding its job file and whatever the file names.
type exampleJob struct {
	name string
	dir  func(t *testing.T) string // returns the directory, job.yaml in it
}

// examplesOnSim are the example jobs that run on the simulator: the
// quick start, the review example as shipped, and the npc-planner example's job (a library
// program) as a job file of the same system prompt, task, schema and
// inputs.
var examplesOnSim = []exampleJob{
	{"review", func(t *testing.T) string { return copyDir(t, "../../examples/review") }},
	// Images classified: each input's photo billed as OpenAI bills it.
	{"photos", func(t *testing.T) string { return copyDir(t, "../../examples/photos") }},
	{"quickstart", func(t *testing.T) string {
		// The README's quick start, at 40 ms a forward pass instead of its
		// 400 (slow enough to interrupt by hand): the same calls and
		// tokens.
		return withBackend(t, copyDir(t, "../../examples/quickstart"), "sim://?latency=40ms&tool_turns=1&seed=1")
	}},
	{"review-free-text", func(t *testing.T) string {
		// The review without its output schema: free-text answers.
		dir := copyDir(t, "../../examples/review")
		job := filepath.Join(dir, "job.yaml")
		b, err := os.ReadFile(job)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(b), "output_schema: findings.schema.json\n", "", 1)
		writeFile(t, dir, "job.yaml", text)
		return dir
	}},
	{"review-repairs", func(t *testing.T) string {
		// The review on a simulator that calls read_file twice, with
		// invalid answers a third of the time: repair turns up to
		// max_turns, and agents that run out of turns (which fail, but
		// cost what they used).
		return withBackend(t, copyDir(t, "../../examples/review"), "sim://?tool_turns=2&invalid=0.3&seed=7")
	}},
	{"review-sim+http", func(t *testing.T) string {
		// The review against the simulator's HTTP server: its prompt
		// counted in the server's chat template, its tool turns unknown
		// to the dry run (2 calls to max_turns).
		_, addr := startModelServer(t, 1)
		return withBackend(t, copyDir(t, "../../examples/review"), "sim+http://"+addr)
	}},
	{"npc-planner", func(t *testing.T) string {
		dir := t.TempDir()
		writeFile(t, dir, "job.yaml", `name: npc-plan
backend: sim://?seed=1
system: "You plan the next moves of a game character."
task: "Character {name} at {x},{y} with {hp} hp, home {home}. Plan up to 4 steps."
output_schema: {type: object, properties: {steps: {type: array, items: {type: string}, minItems: 1, maxItems: 4}}, required: [steps], additionalProperties: false}
pricing: {input: 0.15, cached_input: 0.075, output: 0.60}
inputs: in.jsonl
`)
		var b strings.Builder
		for i := range 500 {
			fmt.Fprintf(&b, `{"name":"npc-%d","x":%d,"y":%d,"hp":%d,"home":"camp"}`+"\n", i, i%100, i/100, i%100)
		}
		writeFile(t, dir, "in.jsonl", b.String())
		return dir
	}},
}

// withBackend rewrites the backend of the job file in dir to url and
// returns dir.
func withBackend(t *testing.T, dir, url string) string {
	t.Helper()
	job := filepath.Join(dir, "job.yaml")
	b, err := os.ReadFile(job)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "backend:") {
			l = "backend: " + strconvQuote(url)
		}
		out = append(out, l)
	}
	writeFile(t, dir, "job.yaml", strings.Join(out, "\n"))
	return dir
}

// strconvQuote quotes s for YAML.
func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// copyDir copies the directory src, two levels deep, into a temporary
// directory and returns it: runs write nothing into the repository.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	return dst
}

// TestDryRunRangeHoldsOnExamples (issue 29's must-show): for every
// example job that runs on the simulator, the dry run's low-high range
// holds the real run's cost, prompt tokens, completion tokens and calls,
// and the dry run counts with the simulator's own tokenizer. It logs the
// point estimate's error against the real run.
func TestDryRunRangeHoldsOnExamples(t *testing.T) {
	for _, ex := range examplesOnSim {
		t.Run(ex.name, func(t *testing.T) {
			dir := ex.dir(t)
			job := filepath.Join(dir, "job.yaml")
			code, stdout, stderr := run(t, t.Context(), "run", job, "--dry-run", "--json")
			if code != 0 {
				t.Fatalf("dry run: exit %d, stderr:\n%s", code, stderr)
			}
			rep := readDryReport(t, stdout)
			if !strings.HasPrefix(rep.Tokenizer, "sim ") && !strings.HasPrefix(rep.Tokenizer, "sim+http ") {
				t.Errorf("tokenizer %q, want the simulator's own", rep.Tokenizer)
			}
			if rep.Cost == nil {
				t.Fatal("dry run has no cost; the job file sets pricing")
			}
			code, stdout, stderr = run(t, t.Context(), "run", job, "--no-state")
			if code != 0 && (code != 1 || !strings.Contains(stderr, "failed")) {
				t.Fatalf("run: exit %d, stderr:\n%s", code, stderr)
			}
			var usage llm.Usage
			var cost float64
			calls := 0
			for s := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
				var l struct {
					Usage      llm.Usage `json:"usage"`
					Cost       *float64  `json:"cost"`
					ModelCalls int       `json:"model_calls"`
				}
				if err := json.Unmarshal([]byte(s), &l); err != nil {
					t.Fatalf("output line %q: %v", s, err)
				}
				if l.Cost == nil {
					t.Fatalf("output line %q has no cost", s)
				}
				usage = usage.Add(l.Usage)
				cost += *l.Cost
				calls += l.ModelCalls
			}
			check := func(what string, real float64, est, lo, hi float64) {
				t.Helper()
				if real < lo || real > hi {
					t.Errorf("%s: real %g outside the dry run's range %g-%g (estimate %g)", what, real, lo, hi, est)
				}
				t.Logf("%-18s real %12.6g  estimate %12.6g  (%+6.1f%%)  range %g-%g", what, real, est, 100*(est-real)/real, lo, hi)
			}
			check("cost", cost, rep.Cost.Estimate, rep.Cost.Low, rep.Cost.High)
			span := func(what string, real int64, s drySpan) {
				t.Helper()
				check(what, float64(real), float64(s.Estimate), float64(s.Low), float64(s.High))
			}
			span("prompt tokens", usage.PromptTokens, rep.PromptTokens)
			span("completion tokens", usage.CompletionTokens, rep.CompletionTokens)
			if usage.MediaTokens > 0 || rep.MediaTokens != nil {
				if rep.MediaTokens == nil {
					t.Fatalf("real run billed %d media tokens; the dry run shows none", usage.MediaTokens)
				}
				span("media tokens", usage.MediaTokens, *rep.MediaTokens)
			}
			if calls > 0 {
				span("calls", int64(calls), rep.Calls)
			}
			if math.IsNaN(cost) || cost <= 0 {
				t.Errorf("real cost %v, want a positive cost", cost)
			}
		})
	}
}
