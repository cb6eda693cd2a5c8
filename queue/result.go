package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// recordScript stores a result once: KEYS results hash, run hash, results
// stream; ARGV index, line. It returns 1 when it stored the line, 0 when
// one was stored before, -1 when the run does not exist.
var recordScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 'done', 1)
redis.call('XADD', KEYS[3], '*', 'index', ARGV[1])
return 1
`)

// Record stores line, the result line of input index of run (the JSON of
// a batchagent.Result, as the CLI writes it), once and atomically: the
// first call for (run, index) stores it, raises the run's Done and appends
// the index to the run's results stream, and returns first true; later
// calls change nothing and return first false, so a task delivered twice
// never yields two results. An unknown (or deleted) run gives an error
// wrapping [ErrNoRun].
func (c *Client) Record(ctx context.Context, run string, index int, line []byte) (first bool, err error) {
	n, err := recordScript.Run(ctx, c.rdb, []string{c.resultsKey(run), c.runKey(run), c.outKey(run)},
		index, line).Int()
	if err != nil {
		return false, c.fail(fmt.Sprintf("record result %d of run %q", index, run), err)
	}
	if n < 0 {
		return false, fmt.Errorf("queue: record result %d of run %q: %w", index, run, ErrNoRun)
	}
	return n == 1, nil
}

// Result returns the recorded line of input index of run; ok is false when
// none is recorded.
func (c *Client) Result(ctx context.Context, run string, index int) (line []byte, ok bool, err error) {
	line, err = c.rdb.HGet(ctx, c.resultsKey(run), strconv.Itoa(index)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, c.fail(fmt.Sprintf("result %d of run %q", index, run), err)
	}
	return line, true, nil
}

// Recorded is one recorded result, as [Client.Results] returns it.
type Recorded struct {
	// Index is the input's position in the run's inputs.
	Index int
	// Line is the result line, as recorded.
	Line []byte
	// Cursor is where the next call to Results continues after this one.
	Cursor string
}

// Results returns up to max results of run recorded after cursor ("" or
// "0": from the first), in the order they were recorded. When none is
// there it blocks up to block (0: it does not block) and then returns
// none, and nil; it ends within about a second of ctx's cancellation. The
// Cursor of the last one returned continues.
func (c *Client) Results(ctx context.Context, run, cursor string, max int, block time.Duration) ([]Recorded, error) {
	if max <= 0 {
		return nil, nil
	}
	if cursor == "" {
		cursor = "0"
	}
	var streams []redis.XStream
	err := blocking(ctx, block, func(b time.Duration) (bool, error) {
		var err error
		streams, err = c.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{c.outKey(run), cursor},
			Count: int64(max), Block: b}).Result()
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, c.fail(fmt.Sprintf("results of run %q after %q", run, cursor), err)
	}
	var out []Recorded
	var fields []string
	for _, s := range streams {
		for _, m := range s.Messages {
			idx, _ := m.Values["index"].(string)
			i, err := strconv.Atoi(idx)
			if err != nil {
				return nil, fmt.Errorf("queue: results of run %q: entry %s: bad index %q", run, m.ID, idx)
			}
			out = append(out, Recorded{Index: i, Cursor: m.ID})
			fields = append(fields, idx)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	lines, err := c.rdb.HMGet(ctx, c.resultsKey(run), fields...).Result()
	if err != nil {
		return nil, c.fail(fmt.Sprintf("results of run %q", run), err)
	}
	for i, l := range lines {
		s, ok := l.(string)
		if !ok {
			return nil, fmt.Errorf("queue: results of run %q: result %d is listed but not stored (run deleted?)", run, out[i].Index)
		}
		out[i].Line = []byte(s)
	}
	return out, nil
}

// retryScript takes a recorded result back so that its input runs again:
// KEYS results hash, run hash, results stream, state hash, task stream;
// ARGV index, the result's entry in the results stream, run ID, input. It
// returns 1 when it took the result back and re-enqueued the input, 0 when
// none is recorded for the index, -1 when the run does not exist.
var retryScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 'done', -1)
redis.call('XDEL', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('XADD', KEYS[5], '*', 'run', ARGV[3], 'index', ARGV[1], 'input', ARGV[4])
return 1
`)

// Retry takes back the result recorded for input index of run, whose
// entry in the run's results stream is entry (its [Recorded.Cursor]), and
// enqueues input at index again, atomically: the result is deleted and
// the run's Done lowered, the entry deleted from the results stream (a
// coordinator reading it again does not find it), the agent's saved state
// deleted (the input runs afresh, not from its failed final state), and a
// task added. The next result recorded for index is then stored as the
// first. It returns false, changing nothing, when no result is recorded
// for index; an unknown run gives an error wrapping [ErrNoRun].
func (c *Client) Retry(ctx context.Context, run string, index int, entry string, input json.RawMessage) (bool, error) {
	if !json.Valid(input) {
		return false, fmt.Errorf("queue: retry input %d of run %q: input is not valid JSON", index, run)
	}
	n, err := retryScript.Run(ctx, c.rdb,
		[]string{c.resultsKey(run), c.runKey(run), c.outKey(run), c.stateKey(run), c.tasksKey()},
		index, entry, run, []byte(input)).Int()
	if err != nil {
		return false, c.fail(fmt.Sprintf("retry input %d of run %q", index, run), err)
	}
	if n < 0 {
		return false, fmt.Errorf("queue: retry input %d of run %q: %w", index, run, ErrNoRun)
	}
	return n == 1, nil
}
