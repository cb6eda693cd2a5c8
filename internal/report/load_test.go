package report_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// writeStore saves states of job "j" into a new store and returns its
// path, closed.
func writeStore(t *testing.T, states ...agent.State) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.db")
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := st.Begin(ctx, "j", checkpoint.Fingerprint{"task": "x"}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.SetInputs(ctx, "j", 5); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		s.JobID = "j"
		if err := st.Save(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadStates(t *testing.T) {
	t.Parallel()
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "task"}}
	path := writeStore(t,
		agent.State{Index: 2, Status: agent.StatusFailed, Failure: &job.Failure{Kind: "timeout"}, Messages: msgs, ModelCalls: 2, Usage: llm.Usage{PromptTokens: 10}},
		agent.State{Index: 0, Status: agent.StatusDone, Messages: msgs, ModelCalls: 1, Usage: llm.Usage{PromptTokens: 20, CompletionTokens: 5},
			Timings: agent.Timings{Total: time.Second, TTFT: 200 * time.Millisecond}},
		agent.State{Index: 1, Status: agent.StatusRunning, Messages: msgs, ModelCalls: 1},
	)
	store, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := report.Load(t.Context(), store, "j")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := report.Totals{Inputs: 5, Done: 2, OK: 1, Failed: 1, Running: 1, ByKind: map[string]int64{"timeout": 1},
		ModelCalls: 4, Usage: llm.Usage{PromptTokens: 30, CompletionTokens: 5}}
	if diff := cmp.Diff(want, d.Totals); diff != "" {
		t.Errorf("Load totals (-want +got):\n%s", diff)
	}
	var idx []int
	for _, a := range d.Agents {
		idx = append(idx, a.Index)
	}
	if diff := cmp.Diff([]int{0, 1, 2}, idx); diff != "" {
		t.Errorf("agents by index (-want +got):\n%s", diff)
	}
	if a := d.Agents[0]; a.Status != "done" || a.TTFT != 200*time.Millisecond || a.Total != time.Second {
		t.Errorf("agent 0 = %+v, want done with its timings", a)
	}
	if a := d.Agents[2]; a.Status != "failed" || a.Kind != "timeout" {
		t.Errorf("agent 2 = %+v, want failed by timeout", a)
	}
	if d.Info.Job != "j" || d.Start.IsZero() || !d.Done || len(d.Samples) != 0 {
		t.Errorf("Load = job %q from %v, done %v, %d samples; want job j, a start, done, no samples", d.Info.Job, d.Start, d.Done, len(d.Samples))
	}
}

func TestLoadUnknownJob(t *testing.T) {
	t.Parallel()
	store, err := checkpoint.OpenReadOnly(writeStore(t))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := report.Load(t.Context(), store, "other"); !errors.Is(err, checkpoint.ErrUnknownJob) {
		t.Errorf("Load(other) = %v, want ErrUnknownJob", err)
	}
}

func TestLoadSamplesAndSpans(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	path := writeStore(t, agent.State{Index: 0, Status: agent.StatusDone, Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}},
		Started: start.Add(time.Second), Timings: agent.Timings{Total: 2 * time.Second},
		Spans: []job.Span{{Turn: 0, Start: start.Add(time.Second), Queue: 100 * time.Millisecond, Inference: time.Second, TTFT: 400 * time.Millisecond, Tools: 300 * time.Millisecond}}})
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// What a Sampler records: its first sample carries the run's info.
	recs := []string{
		`{"t":0,"done":0,"ok":0,"failed":0,"active":1,"inflight":1,"limit":8,"throttles":0,"tokens":0,"info":{"job":"review","model":"gpt-x","price":{"Input":1,"CachedInput":0,"Output":2,"BatchDiscount":0},"price_source":"file"}}`,
		`{"t":1,"done":0,"ok":0,"failed":0,"active":1,"inflight":1,"limit":6,"throttles":2,"tokens":50,"tools":[{"Name":"read_file","Requested":3,"Executed":1,"Coalesced":1,"CacheHits":1}]}`,
		`{"t":2,"done":1,"ok":1,"failed":0,"active":0,"inflight":0,"limit":6,"throttles":2,"tokens":90,"cost":0.0001,"tools":[{"Name":"read_file","Requested":4,"Executed":1,"Coalesced":1,"CacheHits":2}]}`,
	}
	for i, r := range recs {
		if err := st.AddSample(t.Context(), "j", checkpoint.Sample{At: start.Add(time.Duration(i) * time.Second), Data: []byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := report.Load(t.Context(), store, "j")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if d.Info.Job != "review" || d.Info.Model != "gpt-x" || d.Info.Price == nil || d.Info.Price.Output != 2 || d.Info.PriceSource != "file" {
		t.Errorf("Load info = %+v, want the first sample's", d.Info)
	}
	var ts []float64
	var limits []int
	for _, s := range d.Samples {
		ts, limits = append(ts, s.T), append(limits, s.Limit)
	}
	if diff := cmp.Diff([]float64{0, 1, 2}, ts); diff != "" {
		t.Errorf("sample times from the run's start (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{8, 6, 6}, limits); diff != "" {
		t.Errorf("sample limits (-want +got):\n%s", diff)
	}
	if len(d.Tools) != 1 || d.Tools[0].Requested != 4 || d.Tools[0].CacheHits != 2 {
		t.Errorf("Load tools = %+v, want the last sample's", d.Tools)
	}
	if !d.Start.Equal(start) || !d.End.Equal(start.Add(3*time.Second)) {
		t.Errorf("Load spans %v to %v, want %v to %v (the first sample to the agent's end)", d.Start, d.End, start, start.Add(3*time.Second))
	}
	if len(d.Agents) != 1 || len(d.Agents[0].Spans) != 1 || d.Agents[0].Spans[0].TTFT != 400*time.Millisecond || !d.Agents[0].Started.Equal(start.Add(time.Second)) {
		t.Errorf("Load agents = %+v, want agent 0 with its one span", d.Agents)
	}
}

func TestLoadBadSample(t *testing.T) {
	t.Parallel()
	path := writeStore(t)
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddSample(t.Context(), "j", checkpoint.Sample{At: time.Now(), Data: []byte(`{"done":"many"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, err = report.Load(t.Context(), store, "j")
	if err == nil || !strings.Contains(err.Error(), "report: job j: sample 1 of 1") {
		t.Errorf("Load = %v, want an error naming the job and the sample", err)
	}
}

func TestLoadResumedJobCoversAllRuns(t *testing.T) {
	t.Parallel()
	path := writeStore(t,
		agent.State{Index: 0, Status: agent.StatusDone, Input: job.Input{"q": "a"}, Output: []byte(`{"a":1}`), Usage: llm.Usage{PromptTokens: 20}},
		agent.State{Index: 1, Status: agent.StatusFailed, Input: job.Input{"q": "b"}, Failure: &job.Failure{Kind: "tool", Op: "tool",
			Cause: []job.Link{{Message: "lookup: 404"}}}, Usage: llm.Usage{PromptTokens: 10}},
	)
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	// Run 1 did 3 results and 300 tokens; run 2, resumed an hour later,
	// restored them (its results start at 0 and reach 5) and spent 200
	// tokens of its own.
	for i, s := range []string{
		`{"t":0,"done":0,"tokens":0,"info":{"job":"j"}}`, `{"t":1,"done":3,"tokens":300}`,
		`{"t":0,"done":0,"tokens":0,"throttles":0,"info":{"job":"j"}}`, `{"t":1,"done":5,"tokens":200,"throttles":2}`,
	} {
		at := start.Add(time.Duration(i/2)*time.Hour + time.Duration(i%2)*time.Second)
		if err := st.AddSample(t.Context(), "j", checkpoint.Sample{At: at, Data: []byte(s)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	d, err := report.Load(t.Context(), ro, "j")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Runs) != 2 || !d.Runs[1].Start.Equal(start.Add(time.Hour)) || !d.Runs[1].End.Equal(start.Add(time.Hour+time.Second)) {
		t.Fatalf("Load: runs %v, want two, the second from %v for 1s", d.Runs, start.Add(time.Hour))
	}
	var got []string
	for _, s := range d.Samples {
		got = append(got, fmt.Sprintf("done %d tokens %d throttles %d", s.Done, s.Tokens, s.Throttles))
	}
	want := []string{"done 0 tokens 0 throttles 0", "done 3 tokens 300 throttles 0", "done 3 tokens 300 throttles 0", "done 5 tokens 500 throttles 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load: samples (-want +got):\n%s", diff)
	}
	wantRows := []report.Row{
		{Index: 1, Status: "failed", Kind: "tool", Error: "tool: lookup: 404", Input: `{"q":"b"}`, Tokens: 10, Cost: -1},
		{Index: 0, Status: "done", Input: `{"q":"a"}`, Output: `{"a":1}`, Tokens: 20, Cost: -1},
	}
	if diff := cmp.Diff(wantRows, d.Results.Rows); diff != "" {
		t.Errorf("Load: results (-want +got):\n%s", diff)
	}
	if d.Results.Chosen != "all 2 results" || d.Results.Total != 2 || d.Results.Failed != 1 {
		t.Errorf("Load: results %q total %d failed %d, want %q 2 1", d.Results.Chosen, d.Results.Total, d.Results.Failed, "all 2 results")
	}
}
