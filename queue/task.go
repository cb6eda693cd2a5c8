package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Group is the name of the one consumer group through which every worker
// reads the task stream.
const Group = "workers"

// Task is one input of a run, delivered to a worker.
type Task struct {
	// ID is the task's stream entry ID.
	ID string
	// Run is the ID of the run the input belongs to.
	Run string
	// Index is the input's position in the run's inputs.
	Index int
	// Input is the input object as JSON; decode it with UseNumber.
	Input json.RawMessage
}

// enqueueScript adds a task when the run's enqueued count is the task's
// index, and raises the count: KEYS run hash, task stream; ARGV run ID,
// index, input. It returns the entry ID, -1 when the run does not exist,
// or the run's enqueued count when it differs from the index.
var enqueueScript = redis.NewScript(`
local e = redis.call('HGET', KEYS[1], 'enqueued')
if not e then return -1 end
if tonumber(e) ~= tonumber(ARGV[2]) then return tonumber(e) end
local id = redis.call('XADD', KEYS[2], '*', 'run', ARGV[1], 'index', ARGV[2], 'input', ARGV[3])
redis.call('HSET', KEYS[1], 'enqueued', tonumber(ARGV[2]) + 1)
return id
`)

// Enqueue adds the input at index of run to the task stream, atomically
// with raising the run's Enqueued to index+1, so that a coordinator that
// restarts continues from Enqueued. It refuses, with an error, an index
// other than the run's current Enqueued (no index is enqueued twice), and
// an unknown run (an error wrapping [ErrNoRun]). input must be one JSON
// value; it is stored as given.
func (c *Client) Enqueue(ctx context.Context, run string, index int, input json.RawMessage) error {
	if !json.Valid(input) {
		return fmt.Errorf("queue: enqueue input %d of run %q: input is not valid JSON", index, run)
	}
	res, err := enqueueScript.Run(ctx, c.rdb, []string{c.runKey(run), c.tasksKey()},
		run, index, []byte(input)).Result()
	if err != nil {
		return c.fail(fmt.Sprintf("enqueue input %d of run %q", index, run), err)
	}
	switch v := res.(type) {
	case string:
		return nil
	case int64:
		if v < 0 {
			return fmt.Errorf("queue: enqueue input %d of run %q: %w", index, run, ErrNoRun)
		}
		return fmt.Errorf("queue: enqueue input %d of run %q: the run has %d inputs enqueued, want index %d", index, run, v, v)
	default:
		return fmt.Errorf("queue: enqueue input %d of run %q: unexpected reply %T", index, run, res)
	}
}

// isNoGroup reports whether err says the stream or its group is missing.
func isNoGroup(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOGROUP")
}

// createGroup creates the consumer group, and the stream, when missing;
// the group starts at the stream's beginning, so tasks enqueued before any
// worker came are read.
func (c *Client) createGroup(ctx context.Context) error {
	err := c.rdb.XGroupCreateMkStream(ctx, c.tasksKey(), Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// withGroup runs f, and again once the group is created when f finds it
// missing.
func (c *Client) withGroup(ctx context.Context, f func() error) error {
	err := f()
	if !isNoGroup(err) {
		return err
	}
	if err := c.createGroup(ctx); err != nil {
		return err
	}
	return f()
}

// Read returns up to max new tasks for worker, which then holds them
// until it acks them or another worker reclaims them. It blocks up to
// block when no task is there (0: it does not block) and then returns
// none, and nil. Every worker reads through one consumer group, so no two
// get the same new task. The group is created on first use. A blocked
// Read ends within about a second of ctx's cancellation (go-redis does not
// interrupt a read in progress), returning ctx's error unless tasks came. Tasks whose
// entries are malformed are acked, dropped and logged.
func (c *Client) Read(ctx context.Context, worker string, max int, block time.Duration) ([]Task, error) {
	if max <= 0 {
		return nil, nil
	}
	var streams []redis.XStream
	err := blocking(ctx, block, func(b time.Duration) (bool, error) {
		args := &redis.XReadGroupArgs{Group: Group, Consumer: worker, Streams: []string{c.tasksKey(), ">"},
			Count: int64(max), Block: b}
		err := c.withGroup(ctx, func() error {
			var err error
			streams, err = c.rdb.XReadGroup(ctx, args).Result()
			return err
		})
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, c.fail(fmt.Sprintf("read tasks for worker %q", worker), err)
	}
	var msgs []redis.XMessage
	for _, s := range streams {
		msgs = append(msgs, s.Messages...)
	}
	return c.tasks(ctx, msgs), nil
}

// blockSlice is the longest a blocking read waits in Redis at once: go-redis
// does not interrupt a read when its context is cancelled (only a deadline
// bounds it), so a blocking call waits in slices and checks its context
// between them.
const blockSlice = time.Second

// blocking calls read until it returns something or an error, or block has
// passed, or ctx ends. It passes read the time to block in Redis (-1: do not
// block; BLOCK 0 would block for ever): at most blockSlice, and never past
// ctx's deadline, so that the read ends by itself rather than by a broken
// connection (whose reply, entries delivered to a consumer included, would
// be lost).
func blocking(ctx context.Context, block time.Duration, read func(b time.Duration) (got bool, err error)) error {
	end := time.Now().Add(block)
	for {
		b := min(time.Until(end), blockSlice)
		if d, ok := ctx.Deadline(); ok {
			b = min(b, time.Until(d)-50*time.Millisecond)
		}
		if b < time.Millisecond {
			b = -1
		}
		got, err := read(b)
		if err != nil || got || b < 0 {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// tasks decodes entries; malformed ones are acked and deleted.
func (c *Client) tasks(ctx context.Context, msgs []redis.XMessage) []Task {
	out := make([]Task, 0, len(msgs))
	for _, m := range msgs {
		t, err := parseTask(m)
		if err != nil {
			c.log.WarnContext(ctx, "queue: dropping a malformed task", "task", m.ID, "err", err)
			if err := c.Ack(ctx, Task{ID: m.ID}); err != nil {
				c.log.WarnContext(ctx, "queue: dropping a malformed task", "task", m.ID, "err", err)
			}
			continue
		}
		out = append(out, t)
	}
	return out
}

func parseTask(m redis.XMessage) (Task, error) {
	run, ok1 := m.Values["run"].(string)
	idx, ok2 := m.Values["index"].(string)
	in, ok3 := m.Values["input"].(string)
	if !ok1 || !ok2 || !ok3 {
		return Task{}, fmt.Errorf("entry %s lacks run, index or input", m.ID)
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return Task{}, fmt.Errorf("entry %s: bad index %q", m.ID, idx)
	}
	return Task{ID: m.ID, Run: run, Index: i, Input: json.RawMessage(in)}, nil
}

// Reclaim takes for worker up to max tasks that consumers have held for
// longer than minIdle without touching them (XAUTOCLAIM): the tasks of
// workers that died or hang. Tasks worker itself left idle are taken too
// (a worker restarted under the same name gets its own back). It scans
// the whole pending list at most once per call.
func (c *Client) Reclaim(ctx context.Context, worker string, minIdle time.Duration, max int) ([]Task, error) {
	var msgs []redis.XMessage
	start := "0-0"
	for len(msgs) < max {
		var got []redis.XMessage
		next := ""
		err := c.withGroup(ctx, func() error {
			var err error
			got, next, err = c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: c.tasksKey(), Group: Group,
				Consumer: worker, MinIdle: minIdle, Start: start, Count: int64(max - len(msgs))}).Result()
			return err
		})
		if err != nil {
			return nil, c.fail(fmt.Sprintf("reclaim tasks for worker %q", worker), err)
		}
		for _, m := range got {
			if m.Values != nil { // deleted entries come without values (Redis 6.2)
				msgs = append(msgs, m)
			}
		}
		if next == "0-0" || next == "" {
			break
		}
		start = next
	}
	return c.tasks(ctx, msgs), nil
}

// touchScript resets the idle time of the tasks ARGV[2:] that consumer
// ARGV[1] holds in group workers of stream KEYS[1], and leaves alone those
// it does not hold. It returns how many it touched.
var touchScript = redis.NewScript(`
local n = 0
for i = 2, #ARGV do
	local p = redis.call('XPENDING', KEYS[1], 'workers', 'IDLE', 0, ARGV[i], ARGV[i], 1, ARGV[1])
	if #p > 0 then
		redis.call('XCLAIM', KEYS[1], 'workers', ARGV[1], 0, ARGV[i], 'JUSTID')
		n = n + 1
	end
end
return n
`)

// Touch resets the idle time of the tasks ids that worker holds, so that
// a live worker's long agents are not reclaimed; tasks it no longer holds
// (reclaimed by another, or acked) are left alone.
func (c *Client) Touch(ctx context.Context, worker string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, worker)
	for _, id := range ids {
		args = append(args, id)
	}
	err := c.withGroup(ctx, func() error {
		return touchScript.Run(ctx, c.rdb, []string{c.tasksKey()}, args...).Err()
	})
	if err != nil {
		return c.fail(fmt.Sprintf("touch %d tasks of worker %q", len(ids), worker), err)
	}
	return nil
}

// Ack acknowledges task t and deletes it from the stream, once its result
// is recorded. Acking a task twice, or one another worker holds, is not
// an error.
func (c *Client) Ack(ctx context.Context, t Task) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, c.tasksKey(), Group, t.ID)
		p.XDel(ctx, c.tasksKey(), t.ID)
		return nil
	})
	if err != nil {
		return c.fail(fmt.Sprintf("ack task %s (run %q input %d)", t.ID, t.Run, t.Index), err)
	}
	return nil
}
