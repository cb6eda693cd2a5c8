package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// This file runs jobs delivered through the provider's batch API
// (delivery: batch) end to end: `batchagent run` against the simulator's
// OpenAI Files and Batches endpoint.

// startBatchSim serves the HTTP simulator with its Batch API, each batch
// completing after 200 ms; its model calls every tool on two turns, then
// answers: three model calls per agent. It returns the server, for its
// BatchStats, and its address.
func startBatchSim(t *testing.T) (*simhttp.Server, string) {
	t.Helper()
	srv, err := simhttp.New(simhttp.Config{
		Model:           sim.Config{ToolTurns: 2, Seed: 1},
		MaxSeqs:         256,
		MaxQueue:        -1,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 10 * time.Microsecond,
		Batch: true, BatchDelay: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		wg.Wait()
	})
	return srv, strings.TrimPrefix(hs.URL, "http://")
}

// provBatchJob writes a job file over the simulator at addr with the
// read_file tool, three model calls an agent, the given delivery, and n
// inputs; it returns the job's and the inputs' paths.
func provBatchJob(t *testing.T, dir, name, addr, delivery string, n int) (job, in string) {
	t.Helper()
	writeFile(t, dir, "doc.txt", "the shared document\n")
	job = writeFile(t, dir, name+".yaml", fmt.Sprintf(`name: %s
backend: "sim+http://%s/v1"
model: gpt-4o-mini
task: "Read path: doc.txt and summarise item {id}."
tools:
  - name: read_file
    roots: [%q]
limits:
  max_turns: 4
delivery: %s
cache: off
output_schema: {type: object, properties: {summary: {type: string}}, required: [summary]}
`, name, addr, dir, delivery))
	var inputs strings.Builder
	for i := range n {
		fmt.Fprintf(&inputs, "{\"id\": %d}\n", i)
	}
	in = writeFile(t, dir, "in.jsonl", inputs.String())
	return job, in
}

// provBatchLine is what these tests read of a result line.
type provBatchLine struct {
	Index      int             `json:"index"`
	Error      json.RawMessage `json:"error"`
	Cost       *float64        `json:"cost"`
	ModelCalls int             `json:"model_calls"`
	Output     map[string]any  `json:"output"`
	Usage      llm.Usage       `json:"usage"`
}

// readProvBatchLines reads a results file's lines by index, failing the
// test on a line that does not parse or an index seen twice.
func readProvBatchLines(t *testing.T, text string) map[int]provBatchLine {
	t.Helper()
	lines := map[int]provBatchLine{}
	for s := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		var l provBatchLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("result line %q: %v", s, err)
		}
		if _, dup := lines[l.Index]; dup {
			t.Fatalf("input %d has two result lines", l.Index)
		}
		lines[l.Index] = l
	}
	return lines
}

// TestRunProviderBatch runs a three-turn tool-using job through the
// simulated OpenAI batch endpoint: every line ok, each line's cost half of
// the same line's in real time, one submission per round, no call
// submitted twice; its dry run says the delivery and the discount.
func TestRunProviderBatch(t *testing.T) {
	const n = 30
	srv, addr := startBatchSim(t)
	dir := t.TempDir()
	rtJob, in := provBatchJob(t, dir, "realtime", addr, "realtime", n)
	// A submission as soon as a round's n calls wait: a short linger split
	// rounds in two on a loaded machine (6 submissions in CI).
	job, _ := provBatchJob(t, dir, "batch", addr, fmt.Sprintf("{mode: batch, linger: 2s, min_lines: %d, poll_every: 50ms}", n), n)

	code, stdout, stderr := run(t, t.Context(), "run", rtJob, "--inputs", in, "--no-state", "--quiet")
	if code != 0 {
		t.Fatalf("real-time run: exit %d: %s", code, stderr)
	}
	rt := readProvBatchLines(t, stdout)
	if st := srv.BatchStats(); st.Batches != 0 {
		t.Fatalf("the real-time run submitted %d batches", st.Batches)
	}

	code, stdout, stderr = run(t, t.Context(), "run", job, "--inputs", in, "--no-state", "--quiet")
	if code != 0 {
		t.Fatalf("batch run: exit %d: %s", code, stderr)
	}
	got := readProvBatchLines(t, stdout)
	if len(got) != n || len(rt) != n {
		t.Fatalf("%d batch and %d real-time lines, want %d each", len(got), len(rt), n)
	}
	for i := range n {
		b, r := got[i], rt[i]
		if len(b.Error) > 0 || b.Output["summary"] == nil {
			t.Errorf("input %d: error %s, output %v; want a summary", i, b.Error, b.Output)
			continue
		}
		if b.ModelCalls != 3 {
			t.Errorf("input %d made %d model calls, want 3 (two tool turns, then the answer)", i, b.ModelCalls)
		}
		// The same tokens both ways; the simulator's prefix cache may
		// serve more of them from its cache when they arrive together.
		if b.Usage.PromptTokens != r.Usage.PromptTokens || b.Usage.CompletionTokens != r.Usage.CompletionTokens {
			t.Errorf("input %d used %+v in batch, %+v in real time; want the same prompt and completion tokens", i, b.Usage, r.Usage)
		}
		if r.Cost == nil || !near(*r.Cost, gpt4oMini.Cost(r.Usage)) {
			t.Errorf("input %d costs %v in real time, want %v (its usage %+v at the real-time price)", i, deref(r.Cost), gpt4oMini.Cost(r.Usage), r.Usage)
		}
		if b.Cost == nil || *b.Cost <= 0 || !near(*b.Cost, gpt4oMini.Cost(b.Usage)/2) {
			t.Errorf("input %d costs %v in batch, want %v (half its usage %+v at the real-time price)", i, deref(b.Cost), gpt4oMini.Cost(b.Usage)/2, b.Usage)
		}
	}
	st := srv.BatchStats()
	if st.Batches != 3 || st.Lines != 3*n || st.DuplicateSubmissions != 0 {
		t.Errorf("batch stats %+v, want 3 submissions of %d lines in all, none twice", st, 3*n)
	}

	// The dry run says the delivery, at the batch price.
	code, stdout, stderr = run(t, t.Context(), "run", job, "--inputs", in, "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("dry run --json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Delivery string `json:"delivery"`
		Price    *struct {
			Input float64 `json:"input"`
		} `json:"price"`
		RealtimePrice *struct {
			Input float64 `json:"input"`
		} `json:"realtime_price"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("dry run JSON %q: %v", stdout, err)
	}
	if rep.Delivery != "batch" || rep.Price == nil || rep.RealtimePrice == nil || !near(rep.Price.Input, rep.RealtimePrice.Input/2) {
		t.Errorf("dry run %s: want delivery batch at half the real-time input price", stdout)
	}
	code, stdout, stderr = run(t, t.Context(), "run", job, "--inputs", in, "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout+stderr, "delivery: batch") {
		t.Errorf("dry run's text does not say the delivery:\n%s%s", stdout, stderr)
	}
}

// gpt4oMini is gpt-4o-mini's real-time price in the built-in table.
var gpt4oMini = llm.Price{Input: 0.15, CachedInput: 0.075, Output: 0.60}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// TestRunProviderBatchSIGKILL kills `batchagent run` once the endpoint has
// its second batch and runs it again: the second run takes over the
// batches the first submitted from the journal; every input is in the
// results once and no call was submitted twice.
func TestRunProviderBatchSIGKILL(t *testing.T) {
	const n = 30
	srv, addr := startBatchSim(t)
	dir := t.TempDir()
	job, in := provBatchJob(t, dir, "batch", addr, "{mode: batch, linger: 100ms, poll_every: 50ms}", n)
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out, "--quiet"}

	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	for killed := false; !killed; {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before the endpoint had its 2nd batch: %s", err, stderr.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("no 2nd batch within 30s: stats %+v", srv.BatchStats())
		case <-time.After(5 * time.Millisecond):
			if srv.BatchStats().Batches >= 2 {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-done
				killed = true
			}
		}
	}
	code, _, errText := runProcess(t, dir, args...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d: %s", code, errText)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := readProvBatchLines(t, string(raw))
	for i := range n {
		l, ok := got[i]
		if !ok {
			t.Errorf("input %d has no result line", i)
			continue
		}
		if len(l.Error) > 0 || l.ModelCalls != 3 {
			t.Errorf("input %d: error %s after %d model calls; want ok after 3", i, l.Error, l.ModelCalls)
		}
	}
	if len(got) != n {
		t.Errorf("%d result lines, want %d", len(got), n)
	}
	st := srv.BatchStats()
	if st.DuplicateSubmissions != 0 || st.Lines != 3*n {
		t.Errorf("batch stats %+v, want %d lines, none submitted twice", st, 3*n)
	}
}

// TestRunProviderBatchRefusals: a batch delivery the run cannot give is
// refused at start with exit 2 and a message naming the problem.
func TestRunProviderBatchRefusals(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "in.jsonl", "{\"id\": 1}\n")
	job := func(name, body string) string {
		return writeFile(t, dir, name+".yaml", "name: "+name+"\nmodel: gpt-4o-mini\ntask: \"Say {id}.\"\ncache: off\n"+body)
	}
	for _, tt := range []struct {
		name  string
		job   string
		extra []string
		want  []string
	}{
		{"sim", job("sim", "backend: \"sim://\"\ndelivery: batch\n"), nil,
			[]string{"sim://", "has no batch API", "delivery: batch"}},
		{"vllm", job("vllm", "backend: \"vllm://127.0.0.1:1/v1\"\ndelivery: batch\n"), nil,
			[]string{"vllm://", "has no batch API"}},
		{"redis", job("redis", "backend: \"openai+http://127.0.0.1:1/v1\"\ndelivery: batch\n"), []string{"--redis", "redis://127.0.0.1:1"},
			[]string{"batch", "does not run with --redis"}},
		{"fallback", job("fallback", "backend: \"openai+http://127.0.0.1:1/v1\"\nfallbacks:\n  - backend: \"openai+http://127.0.0.1:2/v1?mode=batch\"\n    model: gpt-4o\n"), nil,
			[]string{"fallbacks[0]", "mode=batch", "not a fallback tier"}},
		{"realtime+url", job("conflict", "backend: \"openai+http://127.0.0.1:1/v1?mode=batch\"\ndelivery: realtime\n"), nil,
			[]string{"mode=batch", "delivery says realtime"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", tt.job, "--inputs", in, "--out", filepath.Join(t.TempDir(), "out.jsonl")}, tt.extra...)
			code, _, stderr := run(t, t.Context(), args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
		})
	}
}
