package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// releaseScript re-adds a task to the stream and acknowledges and deletes
// the original, in one step: either both happen or neither. A task that
// is no longer pending for the releasing consumer (acknowledged meanwhile,
// deleted with its run, or reclaimed by another worker, which runs it now)
// is left alone.
//
// KEYS[1]: the task stream. ARGV: group, entry ID, run, index, input,
// consumer.
var releaseScript = redis.NewScript(`
local held = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1, ARGV[6])
if #held == 0 then
  return 0
end
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('XADD', KEYS[1], '*', 'run', ARGV[3], 'index', ARGV[4], 'input', ARGV[5])
return 1
`)

// Release hands task t back: it is re-added to the stream (same run,
// index and input, under a new entry ID) and the original acknowledged
// and deleted, atomically (a Lua script). The agent's checkpointed turns
// are kept, so whoever reads it next continues from the last completed
// turn. A worker that stops gracefully releases the tasks it holds but
// did not finish, so that others take them at once rather than after the
// visibility timeout. A task worker no longer holds (acknowledged, its run
// deleted, or reclaimed by another worker, which is running it) is left
// alone and Release returns nil: releasing it would have a third worker
// run the agent beside the one that reclaimed it. It is safe for
// concurrent use.
func (c *Client) Release(ctx context.Context, worker string, t Task) error {
	err := releaseScript.Run(ctx, c.Redis(), []string{c.tasksKey()},
		Group, t.ID, t.Run, strconv.Itoa(t.Index), string(t.Input), worker).Err()
	if err != nil {
		return c.scrub(fmt.Errorf("queue: release task %s (run %s, index %d): %w", t.ID, t.Run, t.Index, err))
	}
	return nil
}
