package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/progress"
	"github.com/batchagent/batchagent/queue"
)

// coordLogEvery is how often a coordinator off a terminal prints its
// progress line.
const coordLogEvery = 10 * time.Second

// coordCounters is what the progress line says of a coordinator's progress
// s over all workers (the queue q's): the results in the output (restored
// of them there before this run) of the inputs (estimated: those counted,
// until all are enqueued), the failed ones, the inputs enqueued, the
// workers alive and the agents they hold, the tokens and, when the price
// is known, the cost of the lines written this time.
func coordCounters(ctx context.Context, q *queue.Client, name string, s queue.CoordinatorStats, restored, estimated int, price estimate.Price) progress.Counters {
	total := s.Total
	if total < 0 {
		total = estimated
	}
	alive, held := 0, 0
	if ws, err := q.Workers(ctx); err == nil {
		for _, w := range ws {
			if w.Alive {
				alive++
				held += w.Held
			}
		}
	}
	c := progress.Counters{Label: "batchagent: " + name, Done: int64(s.Written), Failed: int64(s.Failed), Restored: int64(restored),
		Total: int64(total), Unit: "agents", Usage: s.Usage, HasUsage: true,
		Parts: []string{fmt.Sprintf("enqueued %d", s.Enqueued), fmt.Sprintf("workers %d alive, %d agents held", alive, held)}}
	if price.Known {
		c.Cost, c.CostKnown = price.Price.Cost(s.Usage), true // the lines written this time
	}
	return c
}

// writeCoordSummary prints the summary of the results a coordinator collected
// (s) in wall, as a table (progress.Table) fitted to w's width when w is a
// terminal; the output at outPath holds s.Written lines; cost is the cost
// row's value.
func writeCoordSummary(w io.Writer, name string, wall time.Duration, s queue.CoordinatorStats, outPath, cost string) {
	n := s.OK + s.Failed
	heading := fmt.Sprintf("batchagent: %s: %d results collected in %s (%.1f agents/s); %d in the output", name, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), s.Written)
	var t progress.Table
	agents := fmt.Sprintf("ok %d · failed %d", s.OK, s.Failed)
	if len(s.FailedByKind) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.FailedByKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.FailedByKind[k]))
		}
		agents += fmt.Sprintf(" (%s)", strings.Join(kinds, ", "))
	}
	t.Add("agents", "%s", agents)
	t.Add("model calls", "%d · turns %d", s.ModelCalls, s.Turns)
	t.Add("tool calls", "%d", s.ToolCalls)
	t.Add("tokens", "prompt %s · completion %s", progress.Count(s.Usage.PromptTokens), progress.Count(s.Usage.CompletionTokens))
	if cost != "" {
		t.Add("cost", "%s", cost)
	}
	t.Add("results", "%s", outPath)
	// A summary that cannot be written has nowhere else to go.
	_ = t.Write(w, heading, progress.Width(w))
}

// coordOutput is where a run over Redis writes its result lines: the
// output itself, or, for a table output (.csv, .parquet), the journal
// beside it, from which the table is written when the coordinator stops
// (as `run` writes one; see outfile.Table).
type coordOutput struct {
	path, lines string // the output; the file of result lines (path, or its journal)
	format      outfile.Format
	cols        []outfile.Column
}

// openCoordOutput returns the output at path of a job whose output schema
// is schema.
func openCoordOutput(path string, schema json.RawMessage) (*coordOutput, error) {
	o := &coordOutput{path: path, lines: path, format: outfile.FormatOf(path)}
	if o.format == outfile.JSONL {
		return o, nil
	}
	cols, err := outfile.Columns(schema)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	o.lines, o.cols = outfile.JournalPath(path), cols
	return o, nil
}

// files returns the files the run writes, for outfile.CheckFiles; flag
// says whether --out named the output.
func (o *coordOutput) files(flag bool) []outfile.File {
	out := jobrun.OutputFile(o.path, flag)
	files := []outfile.File{out}
	if o.lines != o.path {
		journal := out
		journal.Subject, journal.Object, journal.Path = out.Subject+" journal", out.Object+"'s journal", o.lines
		files = append(files, journal)
	}
	return files
}

// finish writes a table output from its journal, removing the journal
// once it holds all total inputs (a later resume rebuilds it from Redis);
// a JSONL output is written already.
func (o *coordOutput) finish(total int) error {
	if o.lines == o.path {
		return nil
	}
	n, err := outfile.WriteTable(o.path, o.format, o.cols, o.lines)
	if err != nil {
		return err
	}
	if total > 0 && n == total {
		return os.Remove(o.lines)
	}
	return nil
}

// runIDOf derives a run's ID from what makes it this run: the job file's
// absolute path and content, the inputs' path and content (their digest)
// and the output's path. Running the same command again gives the same
// ID, and so resumes; after the job or the inputs changed it is another
// run, which starts its output afresh, so no result of the old inputs is
// kept or written.
func runIDOf(jobPath string, job []byte, inPath, inDigest, outPath string) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(jobPath), job, []byte(inPath), []byte(inDigest), []byte(outPath)} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
