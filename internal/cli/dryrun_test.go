package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dryReport is what the tests read of run --dry-run --json.
type dryReport struct {
	Job                string `json:"job"`
	Inputs             string `json:"inputs"`
	Model              string `json:"model"`
	InputsOK           int    `json:"inputs_ok"`
	InputsBad          int    `json:"inputs_bad"`
	Method             string `json:"method"`
	Sampled            int    `json:"sampled"`
	Tokenizer          string `json:"tokenizer"`
	SharedPrefixTokens int64  `json:"shared_prefix_tokens"`
	TaskTokens         struct {
		Min, Median, Max int64
	} `json:"task_tokens"`
	AnswerTokens     *drySpan `json:"answer_tokens"`
	CallsPerAgent    drySpan  `json:"calls_per_agent"`
	Calls            drySpan  `json:"calls"`
	PromptTokens     drySpan  `json:"prompt_tokens"`
	SharedPrefix     *drySpan `json:"shared_prefix_prompt_tokens"`
	CachedTokens     *drySpan `json:"cached_tokens"`
	MediaTokens      *drySpan `json:"media_tokens"`
	CompletionTokens drySpan  `json:"completion_tokens"`
	Delivery         string   `json:"delivery"`
	Price            *dryRate `json:"price"`
	RealtimePrice    *dryRate `json:"realtime_price"`
	PriceSource      string   `json:"price_source"`
	Cost             *struct {
		Estimate, Low, High float64
	} `json:"cost"`
	SampleCost *float64 `json:"sample_cost"`
}

type dryRate struct {
	Input         float64 `json:"input"`
	CachedInput   float64 `json:"cached_input"`
	Output        float64 `json:"output"`
	BatchDiscount float64 `json:"batch_discount"`
}

type drySpan struct {
	Estimate, Low, High int64
}

func readDryReport(t *testing.T, stdout string) dryReport {
	t.Helper()
	var rep dryReport
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	return rep
}

// classifyJob writes a job without tools against the HTTP simulator at
// addr, with the file's pricing, and n inputs; lines maps 1-based line
// numbers to the text that replaces that line.
func classifyJob(t *testing.T, dir, addr, schema string, n int, lines map[int]string) (job, in string) {
	t.Helper()
	job = writeFile(t, dir, "job.yaml", `backend: "sim+http://`+addr+`"
system: "You label short product reviews."
task: "Label this review: {text}"
output_schema: `+schema+`
pricing: {input: 2.5, cached_input: 1.25, output: 10}
inputs: in.jsonl
`)
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if l, ok := lines[i]; ok {
			b.WriteString(l + "\n")
			continue
		}
		fmt.Fprintf(&b, "{\"text\":\"review number %04d: works well\"}\n", i)
	}
	return job, writeFile(t, dir, "in.jsonl", b.String())
}

const flatSchema = `{type: object, properties: {label: {enum: [positive, negative, mixed]}, reason: {type: string, maxLength: 120}}, required: [label]}`

const nestedSchema = `{type: object, properties: {summary: {type: string}, findings: {type: array, maxItems: 4, items: {type: object, properties: {line: {type: integer}, severity: {enum: [low, high]}, note: {type: string}}, required: [line, note]}}}, required: [summary, findings]}`

// TestDryRunBadLine (issue 17's must-show): a dry run of 1,000 inputs
// with one malformed line exits 1 naming FILE:417, estimates the other
// 999, and sends the simulator no request.
func TestDryRunBadLine(t *testing.T) {
	srv, addr := startModelServer(t, 0)
	dir := t.TempDir()
	job, in := classifyJob(t, dir, addr, flatSchema, 1000, map[int]string{417: `{"text": "cut off`})
	code, stdout, stderr := run(t, t.Context(), "run", job, "--dry-run")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a bad line); stderr:\n%s", code, stderr)
	}
	if want := in + ":417: "; !strings.Contains(stderr, want) {
		t.Errorf("stderr does not name %q:\n%s", want, stderr)
	}
	if n := strings.Count(stderr, in+":"); n != 1 {
		t.Errorf("stderr names %d bad lines, want 1:\n%s", n, stderr)
	}
	if want := "1000 inputs in " + in + ": 999 ok, 1 bad"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
	if !regexp.MustCompile(`(?m)^calls +999 +999 +999$`).MatchString(stdout) {
		t.Errorf("stdout does not estimate 999 calls (no tools: one per input):\n%s", stdout)
	}
	if !regexp.MustCompile(`(?m)^cost +\$[0-9.]+ +\$[0-9.]+ +\$[0-9.]+$`).MatchString(stdout) {
		t.Errorf("stdout has no cost row:\n%s", stdout)
	}
	if got := srv.Stats().Requests; got != 0 {
		t.Errorf("the simulator got %d requests, want 0: a dry run calls no model", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"in.jsonl", "job.yaml"}; !slices.Equal(names, want) {
		t.Errorf("files after the dry run: %v, want %v", names, want)
	}

	code, stdout, _ = run(t, t.Context(), "run", job, "--dry-run", "--json")
	rep := readDryReport(t, stdout)
	if code != 1 || rep.InputsOK != 999 || rep.InputsBad != 1 || rep.Calls.Estimate != 999 || rep.Method != "schema" {
		t.Errorf("--json: exit %d, %+v; want 1, 999 ok, 1 bad, 999 calls, method schema", code, rep)
	}
	if got := srv.Stats().Requests; got != 0 {
		t.Errorf("the simulator got %d requests after --json, want 0", got)
	}
}

// TestDryRunBadLines: every kind of bad line is named with its line
// (blank lines count), the first 20 listed and the rest counted.
func TestDryRunBadLines(t *testing.T) {
	_, addr := startModelServer(t, 0)
	lines := map[int]string{
		3:  `{"text": oops}`,             // malformed JSON
		4:  ``,                           // blank: skipped, still counted
		5:  `{"other": "no text field"}`, // a missing placeholder
		6:  `["an", "array"]`,            // not an object
		7:  `42`,                         // not an object
		9:  `{"text": "a", "text": "b"}`, // a key twice
		10: `{"text": {"deep": [1, 2]}}`, // fine: an object renders as JSON
	}
	for i := 20; i < 45; i++ { // 25 more lines missing the field
		lines[i] = `{"txt": "typo"}`
	}
	job, in := classifyJob(t, t.TempDir(), addr, flatSchema, 60, lines)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--dry-run")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		in + ":3: invalid JSON",
		in + `:5: template: input has no field "text"`,
		in + ":6: ",
		in + ":7: ",
		in + ":9: ",
		in + `:20: template: input has no field "text"`,
		in + ": and 10 more bad lines",
		"30 of 59 inputs are bad; the estimate covers the other 29",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	for _, not := range []string{in + ":4:", in + ":10:", in + ":35:"} {
		if strings.Contains(stderr, not) {
			t.Errorf("stderr holds %q: a good line, or one past the first 20", not)
		}
	}
	if n := strings.Count(stderr, in+":"); n != 21 {
		t.Errorf("stderr has %d lines naming the file, want 20 bad lines and the count of the rest:\n%s", n, stderr)
	}
	if !strings.Contains(stdout, "59 inputs in "+in+": 29 ok, 30 bad") {
		t.Errorf("stdout does not count 29 good and 30 bad inputs:\n%s", stdout)
	}
}

// TestDryRunSchemaEstimate: from a flat and a nested output schema, the
// answers' tokens are a range with low <= high, both above zero; the
// prompt is the shared prefix and the task of every input; and the cost
// is the tokens at the file's price (the low end's shared prefix at the
// cached price), the estimate (a typical answer's) within the range.
func TestDryRunSchemaEstimate(t *testing.T) {
	_, addr := startModelServer(t, 0)
	for _, tc := range []struct{ name, schema string }{{"flat", flatSchema}, {"nested", nestedSchema}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 40
			job, _ := classifyJob(t, t.TempDir(), addr, tc.schema, n, nil)
			code, stdout, stderr := run(t, t.Context(), "run", job, "--dry-run", "--json")
			if code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			rep := readDryReport(t, stdout)
			a := rep.AnswerTokens
			if a == nil || a.Low <= 0 || a.Low > a.High {
				t.Fatalf("answer tokens %+v, want 0 < low <= high", a)
			}
			if rep.CompletionTokens.Low != n*a.Low || rep.CompletionTokens.High != n*a.High {
				t.Errorf("completion tokens %+v, want %d answers of %+v", rep.CompletionTokens, n, *a)
			}
			if rep.TaskTokens.Min != rep.TaskTokens.Max || rep.TaskTokens.Min <= 0 {
				t.Errorf("task tokens %+v, want one count above 0 (the inputs are alike)", rep.TaskTokens)
			}
			wantPrompt := n * (rep.SharedPrefixTokens + rep.TaskTokens.Median)
			if rep.PromptTokens.Low != wantPrompt || rep.PromptTokens.High != wantPrompt {
				t.Errorf("prompt tokens %+v, want %d inputs × (prefix %d + task %d) = %d", rep.PromptTokens, n, rep.SharedPrefixTokens, rep.TaskTokens.Median, wantPrompt)
			}
			if rep.SharedPrefix == nil || rep.SharedPrefix.Low != n*rep.SharedPrefixTokens {
				t.Errorf("shared prefix tokens %+v, want %d × %d", rep.SharedPrefix, n, rep.SharedPrefixTokens)
			}
			if rep.Price == nil || rep.PriceSource != "file" || rep.Cost == nil {
				t.Fatalf("price %+v from %q, cost %+v: want the file's", rep.Price, rep.PriceSource, rep.Cost)
			}
			// The file's prices: $2.5 a million prompt tokens, $10 completion.
			// The low cost has the shared prefix at the cached price ($1.25).
			cached := float64(rep.SharedPrefix.Low)
			lo := (float64(rep.PromptTokens.Low)-cached)*2.5/1e6 + cached*1.25/1e6 + float64(rep.CompletionTokens.Low)*10/1e6
			hi := float64(rep.PromptTokens.High)*2.5/1e6 + float64(rep.CompletionTokens.High)*10/1e6
			est := float64(rep.PromptTokens.Estimate)*2.5/1e6 + float64(rep.CompletionTokens.Estimate)*10/1e6
			if !near(rep.Cost.Low, lo) || !near(rep.Cost.High, hi) || !near(rep.Cost.Estimate, est) {
				t.Errorf("cost %+v, want low %v, high %v, estimate %v (the tokens at the file's price)", *rep.Cost, lo, hi, est)
			}
			if a.Estimate < a.Low || a.Estimate > a.High || est < lo || est > hi {
				t.Errorf("answer tokens %+v, cost %+v: want each estimate within its range", *a, *rep.Cost)
			}
		})
	}
}

// TestDryRunTools: with tools the estimate spans 2 calls per agent to
// max_turns, and the conversation grows, so the high prompt is more than
// max_turns first requests.
func TestDryRunTools(t *testing.T) {
	_, addr := startModelServer(t, 1)
	job, in := scaleJob(t, t.TempDir(), addr, 10, "")
	appendTo(t, job, "limits: {max_turns: 5}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	rep := readDryReport(t, stdout)
	if rep.CallsPerAgent.Low != 2 || rep.CallsPerAgent.High != 5 || rep.Calls.Low != 20 || rep.Calls.High != 50 {
		t.Errorf("calls %+v per agent %+v, want 2-5 per agent, 20-50 in all", rep.Calls, rep.CallsPerAgent)
	}
	first := 10 * (rep.SharedPrefixTokens + rep.TaskTokens.Median)
	if rep.PromptTokens.Low <= 2*first || rep.PromptTokens.High <= 5*first {
		t.Errorf("prompt tokens %+v, want more than 2 and 5 first requests (%d each) for the conversation's growth", rep.PromptTokens, first)
	}
	if rep.Cost != nil {
		t.Errorf("cost %+v, want none: the job's model has no price", rep.Cost)
	}
	_, text, _ := run(t, t.Context(), "run", job, "--inputs", in, "--dry-run")
	if !strings.Contains(text, `cost: unknown (no price for model "")`) {
		t.Errorf("table does not say the cost is unknown:\n%s", text)
	}
}

// TestDryRunSample: --sample 5 runs exactly 5 agents at the simulator
// (two calls each: a tool turn and the answer), scales their measured
// calls and tokens to all 20 inputs, and writes no output or state file.
func TestDryRunSample(t *testing.T) {
	srv, addr := startModelServer(t, 1)
	dir := t.TempDir()
	job, in := scaleJob(t, dir, addr, 20, "")
	appendTo(t, job, "output: results.jsonl\npricing: {input: 1, output: 4}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--dry-run", "--sample", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	rep := readDryReport(t, stdout)
	if got := srv.Stats().Requests; got != 10 {
		t.Errorf("the simulator got %d requests, want 10: 5 sampled agents × 2 calls", got)
	}
	if rep.Method != "sample" || rep.Sampled != 5 || rep.InputsOK != 20 {
		t.Errorf("method %q sampled %d of %d, want sample, 5 of 20", rep.Method, rep.Sampled, rep.InputsOK)
	}
	if rep.Calls != (drySpan{40, 40, 40}) {
		t.Errorf("calls %+v, want 40: 20 inputs × the sample's 2 each", rep.Calls)
	}
	if p := rep.PromptTokens; p.Low <= 0 || p.Low > p.Estimate || p.Estimate > p.High {
		t.Errorf("prompt tokens %+v, want 0 < low <= estimate <= high", p)
	}
	if rep.SampleCost == nil || rep.Cost == nil || *rep.SampleCost <= 0 || rep.Cost.Low < 4**rep.SampleCost/5*0.999 {
		t.Errorf("sample cost %v, cost %+v: want the sample's cost, and 20 inputs at least 4 samples' worth", rep.SampleCost, rep.Cost)
	}
	for _, name := range []string{"results.jsonl", "results.jsonl.state.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want no such file after a dry run", name, err)
		}
	}

	code, text, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--dry-run", "--sample", "50")
	if code != 0 {
		t.Fatalf("--sample 50: exit %d; stderr:\n%s", code, stderr)
	}
	if got := srv.Stats().Requests; got != 10+40 {
		t.Errorf("the simulator got %d requests in all, want 50: --sample over the inputs runs all 20", got)
	}
	for _, want := range []string{"method: sample of 20 inputs run for real", "  of which cached", "the sample cost $"} {
		if !strings.Contains(text, want) {
			t.Errorf("--sample 50 table lacks %q:\n%s", want, text)
		}
	}
}

// TestDryRunUsageErrors: flags of a real run contradict --dry-run,
// --sample and --json need it, and a bad job file is a bad job file: exit
// 2, naming both flags or the file.
func TestDryRunUsageErrors(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	bad := writeFile(t, dir, "bad.yaml", "task: \"{id}\"\nno_such_key: 1\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"out", []string{"--dry-run", "--out", "x.jsonl"}, []string{"--dry-run", "--out"}},
		{"state", []string{"--dry-run", "--state", "s.db"}, []string{"--dry-run", "--state"}},
		{"no-state", []string{"--dry-run", "--no-state"}, []string{"--dry-run", "--no-state"}},
		{"retry-failed", []string{"--dry-run", "--retry-failed"}, []string{"--dry-run", "--retry-failed"}},
		{"force", []string{"--dry-run", "--force"}, []string{"--dry-run", "--force"}},
		{"ordered", []string{"--dry-run", "--ordered"}, []string{"--dry-run", "--ordered"}},
		{"redis", []string{"--dry-run", "--redis", "redis://127.0.0.1:1"}, []string{"--dry-run", "--redis"}},
		{"metrics", []string{"--dry-run", "--metrics-addr", "127.0.0.1:0"}, []string{"--dry-run", "--metrics-addr"}},
		{"sample alone", []string{"--sample", "3"}, []string{"--sample", "--dry-run"}},
		{"json alone", []string{"--json"}, []string{"--json", "--dry-run"}},
		{"sample zero", []string{"--dry-run", "--sample", "0"}, []string{"--sample 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, t.Context(), append([]string{"run", job, "--inputs", in}, tc.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %s:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
	code, _, stderr := run(t, t.Context(), "run", bad, "--inputs", in, "--dry-run")
	if code != 2 || !strings.Contains(stderr, bad) || !strings.Contains(stderr, "no_such_key") {
		t.Errorf("bad job file: exit %d, stderr %q; want 2 naming the file and the key", code, stderr)
	}
	code, _, stderr = run(t, t.Context(), "run", job, "--inputs", filepath.Join(dir, "missing.jsonl"), "--dry-run")
	if code == 0 || !strings.Contains(stderr, "missing.jsonl") {
		t.Errorf("missing inputs: exit %d, stderr %q; want a failure naming the file", code, stderr)
	}
}

// TestDryRunBatchDiscount: a model of the built-in table whose provider
// has a batch API gets the same estimate at its batch price too, as a
// line of the text and the price's batch_discount in --json.
func TestDryRunBatchDiscount(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?latency=1ms"
model: gpt-4o-mini
task: "Summarise {text}"
output_schema:
  type: object
  properties: {summary: {type: string, maxLength: 200}}
  required: [summary]
`)
	in := writeFile(t, dir, "in.jsonl", "{\"text\":\"a b c\"}\n{\"text\":\"d e f\"}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	rep := readDryReport(t, stdout)
	if rep.Price == nil || rep.Price.BatchDiscount != 0.5 || rep.Cost == nil || rep.Delivery != "realtime" || rep.RealtimePrice != nil {
		t.Fatalf("delivery %q, price %+v, realtime price %+v, cost %+v: want realtime at gpt-4o-mini's table price with batch_discount 0.5", rep.Delivery, rep.Price, rep.RealtimePrice, rep.Cost)
	}
	code, stdout, stderr = run(t, t.Context(), "run", job, "--inputs", in, "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// The costs are well under a cent: six decimals.
	want := fmt.Sprintf("delivery: realtime; through the provider's batch API (50%% off, delivery: batch) the same tokens would cost $%.6f ($%.6f to $%.6f)",
		rep.Cost.Estimate/2, rep.Cost.Low/2, rep.Cost.High/2)
	if !strings.Contains(stdout, want) {
		t.Errorf("dry run lacks %q:\n%s", want, stdout)
	}
}

// TestDryRunJSONArrayInputs: the dry run reads a .json array of inputs as
// the run does (it read every .json file as JSON lines, failing the whole
// array as one bad line), and names a bad element with its line.
func TestDryRunJSONArrayInputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	if err := os.WriteFile(in, []byte("[\n  {\"text\": \"a\"},\n  {\"text\": \"b\"},\n  7,\n  {\"text\": \"d\"}\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("task: \"Classify {text}\"\ninputs: in.json\nbackend: sim://\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, t.Context(), "run", job, "--dry-run")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (one bad element); stderr:\n%s", code, stderr)
	}
	if want := "4 inputs in " + in + ": 3 ok, 1 bad"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
	if want := in + ":4: "; !strings.Contains(stderr, want) {
		t.Errorf("stderr does not name the bad element's line %q:\n%s", want, stderr)
	}
	if !regexp.MustCompile(`(?m)^calls +3 +3 +3$`).MatchString(stdout) {
		t.Errorf("stdout does not estimate 3 calls:\n%s", stdout)
	}
}
