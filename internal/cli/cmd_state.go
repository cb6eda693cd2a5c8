package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
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
