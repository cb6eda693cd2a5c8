package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/outfile"
)

// openState opens an existing checkpoint store read-only: status and
// export never change it, and work on a file they cannot write.
func openState(path string) (*checkpoint.Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return checkpoint.OpenReadOnly(path)
}

// pickJob returns id, or, when id is empty, the store's only job.
func pickJob(ctx context.Context, store *checkpoint.Store, id string) (string, error) {
	if id != "" {
		return id, nil
	}
	jobs, err := store.Jobs(ctx)
	if err != nil {
		return "", err
	}
	if len(jobs) != 1 {
		return "", fmt.Errorf("the store holds jobs %v: name one with --job", jobs)
	}
	return jobs[0], nil
}

// statusCmd prints the counts of a checkpointed run: `batchagent status
// run.db`; with --agent N, the state of one agent, conversation included.
func statusCmd(ctx context.Context, path string, f statusFlags, stdout, stderr io.Writer) int {
	store, err := openState(path)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitUsage
	}
	defer store.Close()
	if f.agent >= 0 {
		return agentState(ctx, store, f.job, f.agent, stdout, stderr)
	}
	jobs, err := store.Jobs(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	if f.job != "" {
		jobs = []string{f.job}
	}
	sums := make([]checkpoint.Summary, 0, len(jobs))
	for _, id := range jobs {
		s, err := store.Summary(ctx, id)
		if err != nil {
			fmt.Fprintln(stderr, "batchagent status:", err)
			if errors.Is(err, checkpoint.ErrUnknownJob) {
				return exitUsage
			}
			return exitFailed
		}
		sums = append(sums, s)
	}
	if f.json {
		if err := outfile.WriteStatusJSON(stdout, path, sums); err != nil {
			fmt.Fprintln(stderr, "batchagent status:", err)
			return exitFailed
		}
		return exitOK
	}
	for _, s := range sums {
		writeStatus(stdout, s)
	}
	return exitOK
}

// writeStatus prints one job's summary as text.
func writeStatus(stdout io.Writer, s checkpoint.Summary) {
	fmt.Fprintf(stdout, "job %s: ", s.JobID)
	if s.Inputs >= 0 {
		fmt.Fprintf(stdout, "%d inputs · pending %d · ", s.Inputs, s.Pending())
	}
	fmt.Fprintf(stdout, "done %d · failed %d · running %d\n",
		s.ByStatus[agent.StatusDone], s.ByStatus[agent.StatusFailed], s.ByStatus[agent.StatusRunning])
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(s.ByKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, s.ByKind[k]))
	}
	if len(kinds) > 0 {
		fmt.Fprintf(stdout, "  failed by kind: %s\n", strings.Join(kinds, ", "))
	}
	fmt.Fprintf(stdout, "  model calls %d · turns %d · tokens: prompt %s (cached %s) · completion %s\n",
		s.ModelCalls, s.Turns, count(s.Usage.PromptTokens), count(s.Usage.CachedTokens), count(s.Usage.CompletionTokens))
	if span := s.Last.Sub(s.First); span > 0 {
		fmt.Fprintf(stdout, "  %s to %s (%.1f agents/s)\n", s.First.Format(time.DateTime), s.Last.Format(time.DateTime),
			float64(s.ByStatus[agent.StatusDone]+s.ByStatus[agent.StatusFailed])/span.Seconds())
	}
}

// agentState prints the saved state of agent idx of job id as indented
// JSON.
func agentState(ctx context.Context, store *checkpoint.Store, id string, idx int, stdout, stderr io.Writer) int {
	id, err := pickJob(ctx, store, id)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitUsage
	}
	st, err := store.State(ctx, id, idx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		if errors.Is(err, checkpoint.ErrNoState) {
			return exitUsage
		}
		return exitFailed
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(stateView{State: st, Timings: timingsOf(st.Timings), Spans: spansOf(st.Spans)}); err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	return exitOK
}

// exportCmd writes a checkpointed run's results in input order:
// `batchagent export run.db --out results.jsonl`.
func exportCmd(ctx context.Context, path string, f exportFlags, stdout, stderr io.Writer) int {
	if f.out != "" && f.out != "-" {
		reads := []runFile{{object: "the state file", path: path}, {object: "the state file's write-ahead log", path: path + "-wal"}}
		if err := checkRunFiles([]runFile{outputFile(f.out, true)}, reads); err != nil {
			fmt.Fprintln(stderr, "batchagent export:", err)
			return exitUsage
		}
	}
	store, err := openState(path)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent export:", err)
		return exitUsage
	}
	defer store.Close()
	id, err := pickJob(ctx, store, f.job)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent export:", err)
		return exitUsage
	}
	states, err := store.Load(ctx, id)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent export:", err)
		return exitFailed
	}
	var (
		w  io.Writer = stdout
		of *os.File
	)
	if f.out != "" && f.out != "-" {
		if of, err = os.Create(f.out); err != nil {
			fmt.Fprintln(stderr, "batchagent export:", err)
			return exitUsage
		}
		w = of
	}
	js := outfile.NewWriter(w, false)
	unfinished := 0
	for _, st := range states { // ordered by index
		if st.Status == agent.StatusRunning {
			unfinished++
			continue
		}
		if err = js.Write(st.Result(id)); err != nil {
			break
		}
	}
	if cerr := js.Close(); err == nil {
		err = cerr
	}
	if of != nil {
		// The file's close error (a write that failed late) counts too.
		if cerr := of.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "batchagent export:", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "batchagent export: %d results of job %s", js.Written(), id)
	if unfinished > 0 {
		fmt.Fprintf(stderr, " (%d agents unfinished: resume the run to finish them)", unfinished)
	}
	fmt.Fprintln(stderr)
	return exitOK
}

// stateView is an agent's state as `status --agent` prints it: its
// timings and its turns' spans in seconds, as result lines have them
// (queue_s, ...), not in the nanoseconds of the state file.
type stateView struct {
	agent.State
	Timings timingsView `json:"timings"`         // hides State.Timings
	Spans   []spanView  `json:"spans,omitempty"` // hides State.Spans
}

// spanView is one turn's span in seconds.
type spanView struct {
	Turn      int       `json:"turn"`
	Start     time.Time `json:"start"`
	Queue     float64   `json:"queue_s"`
	Inference float64   `json:"inference_s"`
	TTFT      float64   `json:"ttft_s,omitempty"`
	Backoff   float64   `json:"backoff_s,omitempty"`
	Tools     float64   `json:"tools_s,omitempty"`
	Tier      int       `json:"tier,omitempty"`
}

func spansOf(spans []batchagent.Span) []spanView {
	var out []spanView
	for _, sp := range spans {
		out = append(out, spanView{Turn: sp.Turn, Start: sp.Start, Queue: secs(sp.Queue), Inference: secs(sp.Inference),
			TTFT: secs(sp.TTFT), Backoff: secs(sp.Backoff), Tools: secs(sp.Tools), Tier: sp.Tier})
	}
	return out
}

// timingsView are agent timings in seconds, keyed as in result lines.
type timingsView struct {
	Queue     float64 `json:"queue_s"`
	Inference float64 `json:"inference_s"`
	Tools     float64 `json:"tools_s"`
	Backoff   float64 `json:"backoff_s,omitempty"`
	TTFT      float64 `json:"ttft_s"`
	Total     float64 `json:"total_s,omitempty"`
}

func timingsOf(t agent.Timings) timingsView {
	return timingsView{Queue: secs(t.Queue), Inference: secs(t.Inference), Tools: secs(t.Tools),
		Backoff: secs(t.Backoff), TTFT: secs(t.TTFT), Total: secs(t.Total)}
}

// secs rounds d to microseconds, in seconds, as result lines do.
func secs(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }
