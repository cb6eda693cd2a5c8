package jobrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/batchagent/batchagent/reduce"
)

// runReduce reduces the outputs and writes the final output.
func (r *Run) runReduce(ctx context.Context, outputs []json.RawMessage, quiet bool, stderr io.Writer) error {
	start := time.Now()
	rr, err := reduce.Outputs(ctx, r.engine, r.spec, outputs, *r.reduce)
	if err != nil {
		return err
	}
	line := append(append([]byte(nil), rr.Output...), '\n')
	if r.reduceOut == "" {
		if _, err := r.stdout.Write(line); err != nil {
			return fmt.Errorf("reduce output: %w", err)
		}
	} else if err := os.WriteFile(r.reduceOut, line, 0o644); err != nil {
		return fmt.Errorf("reduce output: %w", err)
	}
	if !quiet {
		where := r.reduceOut
		if where == "" {
			where = "stdout"
		}
		fmt.Fprintf(stderr, "  reduce: %d outputs in %d calls over %d levels (%s) → %s\n", rr.Reduced, rr.Calls, rr.Levels,
			time.Since(start).Round(time.Millisecond), where)
	}
	return nil
}
