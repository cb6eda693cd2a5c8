// Command fair-library runs the workload of `batchagent bench fair` (each
// agent reads one shared document through read_file, 200 ms, then answers
// {"value", "first_word"}; 60 ms per forward pass) as a library user's
// program: it links only the engine, the in-process simulator and
// read_file, not the command line's backends, store and servers. It
// prints the wall time against the 320 ms critical path and the peak
// resident set size (Linux), so the engine's own footprint can be told
// from the batchagent binary's:
//
//	go run ./examples/fair-library -n 200
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
)

const criticalPath = 320 * time.Millisecond // forward, tool, forward

func main() {
	n := flag.Int("n", 200, "number of agents")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "fair-library:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	if n < 1 {
		return fmt.Errorf("-n %d: want at least 1 agent", n)
	}
	dir, err := os.MkdirTemp("", "fair-library-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	doc := "Batch inference is a scheduling problem as much as a modelling one.\n"
	if err := os.WriteFile(filepath.Join(dir, "doc.txt"), []byte(doc), 0o644); err != nil {
		return err
	}
	rf, err := filetool.ReadFile(filetool.ReadFileConfig{Roots: []string{dir}, Cacheable: true})
	if err != nil {
		return err
	}
	slowRead := tool.Func(rf.Spec(), func(ctx context.Context, args json.RawMessage) (string, error) {
		t := time.NewTimer(200 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return rf.Call(ctx, args)
	})
	model, err := sim.New(sim.Config{Latency: 60 * time.Millisecond, Seed: 1, ToolTurns: 1})
	if err != nil {
		return err
	}
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID:           "fair",
		Model:        model,
		System:       "You answer questions about documents. Read the document you are given before answering.",
		Task:         "Read the shared document path: doc.txt and report on item {id}.",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`),
		Tools:        []tool.Tool{slowRead},
	})
	if err != nil {
		return err
	}
	// All agents start at once, as the critical path assumes.
	engine, err := batchagent.New(batchagent.Config{MaxActive: n})
	if err != nil {
		return err
	}
	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"id": fmt.Sprint(i)}
	}
	start := time.Now()
	results, err := engine.Run(context.Background(), spec, batchagent.Slice(inputs))
	if err != nil {
		return err
	}
	wall := time.Since(start)
	ok := 0
	for _, r := range results {
		if r.Err == nil {
			ok++
		}
	}
	fmt.Printf(`{"n":%d,"ok":%d,"wall_s":%.4f,"ratio":%.3f,"peak_rss_mb":%.1f}`+"\n",
		n, ok, wall.Seconds(), wall.Seconds()/criticalPath.Seconds(), peakRSSMB())
	if ok != n {
		return fmt.Errorf("%d of %d agents failed", n-ok, n)
	}
	return nil
}

// peakRSSMB reads the process's peak resident set size (VmHWM) in MB; 0
// where /proc is not there.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}
