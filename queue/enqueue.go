package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/batchagent/batchagent"
)

// enqueue adds the inputs after those enqueued before to the run's stream,
// keeping at most Window of them without a result, then sets the run's
// total. An input that cannot be decoded is a result: its failure is
// recorded, and its place in the stream is held by a placeholder (JSON
// null) that the workers acknowledge without running; so is an input of
// c.skip, whose line the output has. A Redis that cannot be reached is
// waited out (c.redis); an error wrapping ErrNoRun says the run is gone.
func (c *Coordinator) enqueue(ctx context.Context) error {
	run := c.cfg.Run.ID
	i, skipped := 0, 0
	for in, ierr := range c.inputs {
		if i < c.start {
			i++
			continue
		}
		for i-skipped-int(c.seen.Load()) >= c.cfg.Window {
			select {
			case <-c.progress:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		raw := json.RawMessage("null")
		switch {
		case c.skip != nil && c.skip.Has(i):
			skipped++
		case ierr != nil:
			line, err := json.Marshal(inputFailure(run, i, ierr))
			if err != nil {
				return fmt.Errorf("input %d: %w", i, err)
			}
			err = c.redis(ctx, fmt.Sprintf("record input %d's failure", i), func() error {
				_, err := c.q.Record(ctx, run, i, line)
				return err
			})
			if err != nil {
				return err
			}
		default:
			b, err := json.Marshal(in)
			if err != nil {
				return fmt.Errorf("input %d: %w", i, err)
			}
			raw = b
		}
		if err := c.redis(ctx, fmt.Sprintf("enqueue input %d", i), func() error { return c.enqueueOne(ctx, i, raw) }); err != nil {
			return err
		}
		i++
		c.enqueued.Store(int64(i))
	}
	if err := c.redis(ctx, "set the run's total", func() error { return c.q.SetTotal(ctx, run, i) }); err != nil {
		return err
	}
	c.total.Store(int64(i))
	return nil
}

// enqueueOne enqueues input i. A refusal because i is enqueued already
// (the reply to an earlier try was lost with the connection) is success.
func (c *Coordinator) enqueueOne(ctx context.Context, i int, raw json.RawMessage) error {
	err := c.q.Enqueue(ctx, c.cfg.Run.ID, i, raw)
	if err == nil || errors.Is(err, ErrNoRun) {
		return err
	}
	if st, serr := c.q.RunStatus(ctx, c.cfg.Run.ID); serr == nil && st.Enqueued > i {
		return nil
	}
	return err
}

// Failed returns the failed results recorded in the run, by input index,
// each with its entry in the run's results stream: those that
// [Coordinator.Retry] runs again. Inputs that could not be decoded (kind
// input) would fail again and are left alone.
func (c *Coordinator) Failed(ctx context.Context) (map[int]string, error) {
	failed := map[int]string{}
	cursor := "0"
	for {
		recs, err := c.q.Results(ctx, c.cfg.Run.ID, cursor, 1024, 0)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			return failed, nil
		}
		for _, rec := range recs {
			cursor = rec.Cursor
			var l struct {
				Error *struct {
					Kind string `json:"kind"`
				} `json:"error"`
			}
			if json.Unmarshal(rec.Line, &l) == nil && l.Error != nil && l.Error.Kind != string(batchagent.KindInput) {
				failed[rec.Index] = rec.Cursor
			}
		}
	}
}

// Retry takes back the failed results in failed (index → results-stream
// entry, as [Coordinator.Failed] returns them) and enqueues their inputs,
// read again from Inputs, once more; it returns how many it enqueued. The
// caller drops their lines from its output (and from Written) first: a
// coordinator stopped between the two finds the failures in Redis again.
func (c *Coordinator) Retry(ctx context.Context, failed map[int]string) (int, error) {
	if len(failed) == 0 {
		return 0, nil
	}
	inputs, err := c.cfg.Inputs()
	if err != nil {
		return 0, err
	}
	n, i, last := 0, 0, slices.Max(slices.Collect(maps.Keys(failed)))
	for input, ierr := range inputs {
		entry, ok := failed[i]
		i++
		if !ok || ierr != nil {
			if i > last {
				break
			}
			continue
		}
		b, err := json.Marshal(input)
		if err != nil {
			return n, fmt.Errorf("input %d: %w", i-1, err)
		}
		again, err := c.q.Retry(ctx, c.cfg.Run.ID, i-1, entry, b)
		if err != nil {
			return n, err
		}
		if again {
			n++
		}
		if i > last {
			break
		}
	}
	return n, nil
}
