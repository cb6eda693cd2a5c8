// Package cli is the batchagent command on spf13/cobra: run, serve,
// worker, status, export, report, bench, sim serve, version, completion
// and help. It holds only the commands: the cobra tree and flags (GNU-style,
// --json, -n N, which may follow positional arguments), checks of
// contradictory flags, opening the backends and tools a job file names,
// signals, and wiring a command's output. Each command reads its flags,
// calls the package that owns its concept and prints: the engine
// (package batchagent), internal/jobrun (the run of a job file),
// internal/config (job and serve files), queue
// (Worker, Coordinator), internal/outfile (the results file, status,
// export), internal/estimate (the dry run), internal/progress (the
// progress line), internal/report (report and live view), server and
// server/batchapi (the gateway), internal/openaibatch and internal/bench.
// Only cmd/batchagent imports it (TestOnlyMainImportsCLI).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1 // some inputs failed, an I/O failure, or the backend never answered (inputs left pending)
	exitUsage       = 2 // bad job file or flags
	exitInterrupted = 130
)

// Main runs the command line args and returns the process exit status:
// 0 when everything succeeded, 1 when some inputs failed or I/O failed, 2
// for a usage error (bad flags, arguments or job file) and 130 when SIGINT
// or SIGTERM interrupted it (finished results are kept).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage() // writes to stderr; it cannot fail
		return exitUsage
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ee, ok := errors.AsType[exitError](err); ok {
		return ee.code
	}
	// A usage error found by cobra or by the commands' argument checks.
	cmd := "batchagent"
	if ue, ok := errors.AsType[*usageError](err); ok {
		cmd = ue.cmd
	} else if c, _, ferr := root.Find(args); ferr == nil {
		cmd = c.CommandPath()
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd, err, cmd)
	return exitUsage
}

// exitError carries a command's exit status, once the command has printed
// what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitWith returns nil for exitOK, else an exitError carrying code.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return exitError{code}
}

// usageError is a bad flag or argument of the command cmd ("batchagent
// run"): Main prints it with a pointer to the command's help, exit 2.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
