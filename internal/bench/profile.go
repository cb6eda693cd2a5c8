package bench

import (
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// StartProfiles starts a CPU profile and an execution trace when their
// file names are set, and returns the function that stops and writes
// them. On error, what was started is already stopped or is stopped by
// the returned function; calling it is always safe.
func StartProfiles(cpuProfile, traceFile string) (stop func(), err error) {
	var stops []func()
	stop = func() {
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
