package cli

import (
	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/queue"
)

func (a *app) workerCommand() *cobra.Command {
	f := workerFlags{maxActive: queue.DefaultMaxActive, visibility: queue.DefaultVisibility, grace: jobrun.GracePeriod}
	cmd := &cobra.Command{
		Use:   "worker --redis URL [flags]",
		Short: "Run the agents of any run queued in Redis",
		Long: `Run agents for every run queued in Redis by 'batchagent run --redis': read
tasks from the runs' stream (one consumer group shared by all workers), run
each input's agent, checkpointing every turn into Redis, record its result
once and acknowledge it. Start as many workers as you like, on any host that
sees the job file's directory (or with self-contained job files).

A worker heartbeats, and touches the tasks it holds; the tasks of a worker
silent for --visibility are reclaimed by the others, which continue each
agent from its last completed turn. The first SIGINT or SIGTERM stops
reading, finishes the turns in flight (up to --grace) and hands the
unfinished tasks back at once; a second stops at once. A worker killed
(SIGKILL) loses only its turns in flight.

The URL is redis://[:password@]host:port[/db], or rediss:// for TLS; the
password is never printed.`,
		Example: `  batchagent worker --redis redis://127.0.0.1:6379
  batchagent worker --redis rediss://:$REDIS_PASSWORD@redis.internal:6380 --max-active 256`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			return exitWith(runWorker(cmd.Context(), f, a.logger, a.stderr))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.redis, "redis", "", "URL of the Redis that holds the runs: redis://[:password@]host:port[/db] or rediss:// (TLS)")
	fl.StringVar(&f.id, "id", "", "the worker's name in the queue and in status (default HOST-PID)")
	fl.IntVar(&f.maxActive, "max-active", f.maxActive, "agents held at once")
	fl.DurationVar(&f.visibility, "visibility", f.visibility, "visibility timeout: the tasks of a worker silent this long are reclaimed by others")
	fl.DurationVar(&f.grace, "grace", f.grace, "on SIGINT/SIGTERM, how long to wait for the turns in flight before stopping at once")
	return cmd
}
