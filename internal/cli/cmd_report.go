package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/internal/report"
)

// reportFlags are the flags of `batchagent report`.
type reportFlags struct {
	out string // the HTML file; "": beside the state file; "-": stdout
	job string // the job to draw; "": the store's only job
}

func (a *app) reportCommand() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report STATE.db [flags]",
		Short: "Write a checkpointed run's report: one self-contained HTML page of charts",
		Long: `Write the report of the run in a state file as one HTML page that opens
offline (styles and scripts inline, nothing loaded from the network): the
run's progress (done %, ETA), a results table (input, output, error, turns,
tokens, cost; search, filter by result or error kind, pages of 50), an agent
timeline (per turn: queue wait, backoff, inference, tool wait; 300 agents
sampled evenly by index when there are more), throughput and agents in flight
over time, the adaptive limit and throttled answers (429s) over time,
histograms of the time to first token and of the turn latency, failures by
kind, tool calls (requested, executed, coalesced, cache hits) and cost.

The limit, throttle, tool and cost charts come from the samples that
'batchagent run' records in the state file once a second; a state file
without them still gives a report, its throughput from the agents' end times.
A resumed job's report covers all its runs: their tokens and cost add up, and
the page names each run.

The results table holds every result of a run of up to 5,000; past that, the
failures first (up to 2,500, by index), then the other results sampled evenly
by index, each cell cut at 1 KB; the page says how many of how many it shows.

--out defaults to the state file's name with .db replaced by .report.html
(results.jsonl.state.db gives results.jsonl.state.report.html); - writes to
stdout. The state file is opened read-only.`,
		Example: `  batchagent report results.jsonl.state.db
  batchagent report results.jsonl.state.db --out report.html
  batchagent report run.db --job review --out - > report.html`,
		Args: exactArgs(1, "exactly one state file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSignals(cmd.Context(), func(ctx context.Context) int {
				return reportCmd(ctx, args[0], f, a.stdout, a.stderr)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "the HTML file (default: STATE.report.html beside the state file; - for stdout)")
	fl.StringVar(&f.job, "job", "", "the job to draw (default: the store's only job)")
	return cmd
}

// reportPath returns the default report file of the state file at path:
// its .db extension, if any, replaced by .report.html.
func reportPath(path string) string {
	return strings.TrimSuffix(path, ".db") + ".report.html"
}

// reportCmd writes the report of a state file: `batchagent report`.
func reportCmd(ctx context.Context, path string, f reportFlags, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "batchagent report:", err)
		return code
	}
	store, err := openState(path)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer store.Close()
	id, err := pickJob(ctx, store, f.job)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("%s: %w", path, err))
	}
	d, err := report.Load(ctx, store, id)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("%s: %w", path, err))
	}
	if f.out == "-" {
		if err := report.Write(stdout, d); err != nil {
			return fail(exitFailed, err)
		}
		return exitOK
	}
	out := f.out
	if out == "" {
		out = reportPath(path)
	}
	if err := report.WriteFile(out, d); err != nil {
		return fail(exitFailed, err)
	}
	fmt.Fprintf(stderr, "batchagent report: wrote %s (%d agents; results table: %s)\n", out, len(d.Agents), d.Results.Chosen)
	return exitOK
}
