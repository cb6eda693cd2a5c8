package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/jobrun"
)

// dryRunHelp is the run command's help on --dry-run.
const dryRunHelp = `
--dry-run reads the job and every input without running anything: no
model call, no state file, no output. It renders each input's first request
as the agents build it (system prompt with the output schema's
instructions, tool definitions, the task) and counts its tokens offline
with the backend's own tokenizer: the simulator's count on sim:// and
sim+http://, tiktoken's vocabulary for OpenAI models, o200k_base standing
in for other models (the "tokens counted by" line names it). It reports
every bad input line as FILE:LINE on stderr (the first 20, then a count;
exit status 1) and prints the estimated model calls, prompt tokens (of
which the shared prefix), completion tokens and cost of the other inputs:
an estimate (a typical run) and a low-high range that bounds the run from
its shortest answers and conversations to its longest (the low cost with
every token sent again, such as the shared prefix, at the cached price, as
a backend's prefix cache may serve it, except on sim://, which caches
nothing; the others without a cache). Without --sample
the answers come from the output schema (low: required properties,
minItems, short strings; typical: every property, a few items, strings of
a sentence; high: every property, maxItems or 5 items, maxLength or
200-character strings; 10-300 tokens without a schema). An agent without
tools makes one call; with tools, 2 calls (a tool turn, then the answer)
to max_turns calls, each tool turn costing its calls' names and arguments
(from each tool's parameter schema) and growing the conversation that the
next call sends again by those and a tool result of 10 (low), 200
(estimate) or 1000 (high) tokens. On sim:// the simulator's own behaviour
is used: tool_turns tool turns, each calling every tool it may, then the
answer. Packing jobs make ceil(inputs / pack.max_agents) calls, each
sending the shared prefix once. --sample K instead runs K inputs, evenly
spread over the file, for real (their results are not written) and scales
their measured calls and tokens per agent (median; low and high from the
smallest and largest) to all the inputs. --json prints the estimate as one
JSON object. Exit status 1 when a line is bad or a sampled agent failed.`

// dryRunContradictions are the run flags that only make sense for a real
// run: --dry-run refuses them.
var dryRunContradictions = []string{"out", "state", "no-state", "force", "retry-failed", "ordered", "redis", "run-id", "window", "metrics-addr", "openai-batch", "config", "batch-state", "ui", "ui-public", "ui-linger"}

// checkDryRunFlags rejects --sample or --json without --dry-run, a
// --sample below 1, and --dry-run with a flag of a real run, naming both.
func checkDryRunFlags(f runFlags, changed func(string) bool) error {
	if !f.dryRun {
		for _, name := range []string{"sample", "json"} {
			if changed(name) {
				return fmt.Errorf("--%s goes with --dry-run: add --dry-run, or drop --%s", name, name)
			}
		}
		return nil
	}
	if changed("sample") && f.sample < 1 {
		return fmt.Errorf("--sample %d: want 1 input or more", f.sample)
	}
	for _, name := range dryRunContradictions {
		if changed(name) {
			return fmt.Errorf("--dry-run and --%s contradict each other: a dry run writes no output or state and runs nothing; drop one", name)
		}
	}
	return nil
}

// runDryRun is `batchagent run --dry-run`: it estimates the job at path
// without running it, or runs --sample inputs only.
func runDryRun(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) int {
	d, err := prepareDryRun(ctx, path, f)
	if d != nil {
		defer func() {
			if err := d.job.Close(); err != nil {
				fmt.Fprintln(stderr, "batchagent run: warning:", err)
			}
		}()
	}
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	st, err := d.est.Scan(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return failedOrInterrupted(ctx)
	}
	st.WriteBad(stderr, shownPath(d.inPath))
	rep := d.est.Report(st)
	rep.Inputs = shownPath(d.inPath)
	code := exitOK
	if st.Bad > 0 {
		code = exitFailed
	}
	if f.sample > 0 && st.OK > 0 {
		// f.sample valid inputs, evenly spread over the file, run through the
		// real engine and backend, with no checkpoint store and no output.
		cfg, err := d.job.EngineConfig(f.Logger)
		var results []batchagent.Result
		if err == nil {
			results, err = d.est.Sample(ctx, cfg, st, f.sample)
		}
		if err != nil {
			fmt.Fprintln(stderr, "batchagent run: --sample:", err)
			return failedOrInterrupted(ctx)
		}
		for _, res := range results {
			if res.Err != nil {
				fmt.Fprintf(stderr, "batchagent run: --sample: input %d: %v\n", res.Index+1, res.Err)
				code = exitFailed
			}
		}
		rep.FromSample(results, d.job.Price)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "batchagent run:", err)
			return exitFailed
		}
		return code
	}
	if d.job.Router != nil {
		fmt.Fprintln(stdout, "backend:", config.DeploymentsLine(d.job.File.Deployments))
	}
	rep.WriteTable(stdout)
	return code
}

// failedOrInterrupted is the exit status of a dry run that failed: 130
// when a signal ended ctx.
func failedOrInterrupted(ctx context.Context) int {
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return exitFailed
}

// dryRun is a prepared dry run: the job, its backend's client and the
// estimate of its inputs.
type dryRun struct {
	job    *jobrun.Job // no engine, store or output
	est    *estimate.Job
	inPath string
}

// prepareDryRun loads the job file as run does (the same errors), opens
// it as a run does and checks its inputs' placeholders; it opens no
// state, output or lock. The backend's client is built, as run builds it,
// but not called. The caller closes the returned dryRun's job, where it
// is set, also on error.
func prepareDryRun(ctx context.Context, path string, f runFlags) (*dryRun, error) {
	cj, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	d := &dryRun{}
	if d.job, err = jobrun.OpenJob(ctx, path, cj, jobrun.JobOptions{Backend: f.Backend, NoCache: true}); err != nil {
		return nil, err
	}
	d.inPath = cj.Inputs
	if f.Inputs != "" {
		d.inPath = f.Inputs
	}
	if d.inPath == "" {
		return d, fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", path)
	}
	if _, err = jobrun.InputFormatOf(d.inPath); err != nil {
		return d, err
	}
	if err := jobrun.CheckPlaceholders(path, cj.Def.Task, d.inPath); err != nil {
		return d, err
	}
	d.est, err = estimate.New(estimate.Config{
		Name: d.job.Name, Path: path, Spec: d.job.Spec, Model: d.job.Model, Price: d.job.Price, Inputs: d.inPath,
		Backend: d.job.Backend, InputTypes: jobrun.InputTypes(d.job.Tools.Tools),
	})
	return d, err
}

// shownPath returns path relative to the working directory when it is
// below it, else as it is.
func shownPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}
