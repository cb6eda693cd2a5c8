package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/internal/progress"
)

// app holds what the commands share: the output streams and the logger the
// global flags build.
type app struct {
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
	// logger is built from --log-level and --log-format before any command
	// runs; it writes to stderr.
	logger *slog.Logger
}

// newRoot builds the command tree. Each subcommand's definition (flags,
// help) lives in a cmd_*.go file and calls the function that does the work.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdout: stdout, stderr: progress.NewWriter(stderr)}
	root := &cobra.Command{
		Use:   "batchagent",
		Short: "Run many LLM agents in parallel: input list in, structured result list out",
		Long: `batchagent runs many LLM agents in parallel: one agent per input, each a
multi-turn loop of model calls and tool calls that ends in a JSON answer
validated against the job's output schema; one JSON result line per input.

Exit status: 0 all inputs succeeded, 1 some inputs failed (or an I/O
failure), 2 a usage error (flags, arguments, job file), 130 interrupted.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		DisableAutoGenTag: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			l, err := newLogger(a.logLevel, a.logFormat, a.stderr)
			if err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			a.logger = l
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.logLevel, "log-level", "warn", "log level of the messages on stderr: debug, info, warn or error")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{cmd: c.CommandPath(), err: err}
	})
	root.SetHelpCommand(helpCommand())
	root.AddCommand(
		a.runCommand(),
		a.statusCommand(),
		a.exportCommand(),
		a.reportCommand(),
		a.benchCommand(),
		a.simCommand(),
		a.serveCommand(),
		a.workerCommand(),
		a.versionCommand(),
		dryRunTopic(),
	)
	return root
}

// helpCommand is cobra's help command, except that an unknown topic is a
// usage error (exit 2) rather than the root's usage with exit 0.
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help provides help for any command in the application.\nSimply type batchagent help [path to command] for full details.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("unknown help topic %q", strings.Join(args, " "))}
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// newLogger builds the logger of --log-level and --log-format, writing to w.
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// exactArgs is cobra.ExactArgs with a message that says what the
// arguments are ("want one job file").
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("want %s, got %d arguments", what, len(args))}
		}
		return nil
	}
}

// withSignals runs f with a context that SIGINT and SIGTERM cancel.
func withSignals(ctx context.Context, f func(ctx context.Context) int) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitWith(f(ctx))
}
