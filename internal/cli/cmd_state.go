package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/outfile"
)

// statusFlags are the flags of `batchagent status`.
type statusFlags struct {
	agent int    // print this agent's state; -1: the summary
	job   string // job of agent; "": the store's only job
	json  bool   // the summary as one JSON object
	redis string // --redis: the queue's runs and workers instead of a state file
}

// exportFlags are the flags of `batchagent export`.
type exportFlags struct {
	out string // output file; "" or "-": stdout
	job string // job to export; "": the store's only job
}

func (a *app) statusCommand() *cobra.Command {
	f := statusFlags{agent: -1}
	cmd := &cobra.Command{
		Use:   "status {STATE.db | --redis URL} [flags]",
		Short: "Print the progress of a checkpointed run",
		Long: `Print the progress of a run from its state file (OUT.state.db by default):
per job, the inputs, pending, done, failed and running agents, failures by
kind, model calls, turns and tokens. With --agent N, print agent N's saved
state as JSON, conversation included. The state file is opened read-only:
status works on a read-only file or filesystem, and while the run goes on.

With --redis URL instead of a state file, print each run in that Redis (the
ID, job file, results done, inputs enqueued and in all, the coordinator's
last heartbeat, finished or not) and each worker (alive, agents held, last
heartbeat).`,
		Example: `  batchagent status results.jsonl.state.db
  batchagent status results.jsonl.state.db --json
  batchagent status results.jsonl.state.db --agent 7
  batchagent status --redis redis://127.0.0.1:6379`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.redis != "" {
				return exactArgs(0, "no state file with --redis")(cmd, args)
			}
			return exactArgs(1, "exactly one state file")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.redis != "" {
				for _, name := range []string{"agent", "job"} {
					if cmd.Flags().Changed(name) {
						return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("--redis and --%s contradict each other (--%s reads a state file): drop one", name, name)}
					}
				}
				return withSignals(cmd.Context(), func(ctx context.Context) int {
					return queueStatus(ctx, f.redis, f.json, a.stdout, a.stderr)
				})
			}
			if cmd.Flags().Changed("agent") && f.agent < 0 {
				return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("--agent %d: want an input index, from 0", f.agent)}
			}
			if f.json && f.agent >= 0 {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--json and --agent contradict each other: --agent prints JSON already")}
			}
			return withSignals(cmd.Context(), func(ctx context.Context) int {
				return statusCmd(ctx, args[0], f, a.stdout, a.stderr)
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.agent, "agent", -1, "print this agent's saved state (input index, from 0) as JSON, conversation included")
	fl.StringVar(&f.job, "job", "", "job of --agent, or the one job to summarize (default: the store's only job, or all for the summary)")
	fl.BoolVar(&f.json, "json", false, "print the summary as one JSON object")
	fl.StringVar(&f.redis, "redis", "", "print the runs and workers of the queue in this Redis (redis://[:password@]host:port[/db] or rediss://) instead of a state file's progress")
	return cmd
}

func (a *app) exportCommand() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export STATE.db [flags]",
		Short: "Write a checkpointed run's results in input order",
		Long: `Write the results stored in a run's state file, one JSON line per finished
input in input order, in the same form as the run's output. Unfinished agents
are counted on stderr: resume the run to finish them. The state file is opened
read-only.`,
		Example: `  batchagent export results.jsonl.state.db --out results.sorted.jsonl`,
		Args:    exactArgs(1, "exactly one state file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSignals(cmd.Context(), func(ctx context.Context) int {
				return exportCmd(ctx, args[0], f, a.stdout, a.stderr)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "output file (default: stdout)")
	fl.StringVar(&f.job, "job", "", "job to export (default: the store's only job)")
	return cmd
}

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
		outfile.WriteStatus(stdout, s)
	}
	return exitOK
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
	if err := outfile.WriteAgentState(stdout, st); err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	return exitOK
}

// exportCmd writes a checkpointed run's results in input order:
// `batchagent export run.db --out results.jsonl`.
func exportCmd(ctx context.Context, path string, f exportFlags, stdout, stderr io.Writer) int {
	if f.out != "" && f.out != "-" {
		reads := []outfile.File{{Object: "the state file", Path: path}, {Object: "the state file's write-ahead log", Path: path + "-wal"}}
		if err := outfile.CheckFiles([]outfile.File{jobrun.OutputFile(f.out, true)}, reads); err != nil {
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
	written, unfinished, err := outfile.Export(w, id, states)
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
	fmt.Fprintf(stderr, "batchagent export: %d results of job %s", written, id)
	if unfinished > 0 {
		fmt.Fprintf(stderr, " (%d agents unfinished: resume the run to finish them)", unfinished)
	}
	fmt.Fprintln(stderr)
	return exitOK
}
