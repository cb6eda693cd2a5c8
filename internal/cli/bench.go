package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/batchagent/batchagent/internal/bench"
	"github.com/batchagent/batchagent/llm"
)

// benchFlags are the flags of `batchagent bench`.
type benchFlags struct {
	opt                   bench.Options
	cpuProfile, traceFile string
}

// benchCmd runs a bench scenario: `batchagent bench fair --json`.
func benchCmd(ctx context.Context, scenario string, f benchFlags, stdout, stderr io.Writer) int {
	opt := f.opt
	cpuProfile, traceFile := f.cpuProfile, f.traceFile
	if opt.Backend != "" {
		opt.APIKey = llm.Secret(environ("OPENAI_API_KEY"))
	}
	stopProfiles, err := startProfiles(cpuProfile, traceFile)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent bench:", err)
		return exitUsage
	}
	defer stopProfiles()
	if _, err := bench.Run(ctx, scenario, opt, stdout); err != nil {
		fmt.Fprintln(stderr, "batchagent bench:", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitUsage
	}
	return exitOK
}

// startProfiles starts a CPU profile and an execution trace when their
// file names are set, and returns the function that stops and writes them.
func startProfiles(cpuProfile, traceFile string) (func(), error) {
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err != nil {
			stop()
			return func() {}, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return func() {}, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}
