// Package cli implements the batchagent command: run, bench and help.
// Flags use the standard library's flag syntax (-json and --json alike, as
// BENCHMARKS.md writes them) and may follow positional arguments.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1 // some inputs failed, or the backend never answered (inputs left pending)
	exitUsage       = 2 // bad job file or flags
	exitInterrupted = 130
)

const usage = `batchagent runs many LLM agents in parallel: input list in, structured result list out.

Usage:
  batchagent run JOB.yaml [--inputs FILE] [--out FILE] [--backend URL] [--ordered] [--state FILE] [--force] [--retry-failed]
  batchagent status STATE.db [--agent N [--job ID]]
  batchagent export STATE.db [--out FILE]
  batchagent bench fair|slots|scale|server|dedup [-n N] [-fail P] [-json] [-mode engine|naive]
  batchagent sim serve [--addr 127.0.0.1:8000] [--max-seqs N] [--max-queue N] [--prefill-per-token D] [--decode-step D] [--no-prefix-cache] [--seed N] [--tool-turns N] [--api-key-env NAME]
  batchagent help

Run "batchagent COMMAND -h" for a command's flags.
`

// Main runs the command line args and returns the process exit status.
// SIGINT and SIGTERM cancel the run: finished results are kept and the
// status is 130.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if args[0] == "run" {
		// run stops in two phases and handles its signals itself.
		return runCmd(ctx, args[1:], stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "status":
		return statusCmd(ctx, args[1:], stdout, stderr)
	case "export":
		return exportCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "sim":
		return simCmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "batchagent: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// parse parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// stringList is a comma-separated list flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}
