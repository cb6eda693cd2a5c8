package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ForgetAfter is how long after its last heartbeat a dead worker is still
// listed by [Client.Workers].
const ForgetAfter = 10 * time.Minute

// WorkerStatus is a worker as its heartbeats describe it.
type WorkerStatus struct {
	// ID is the worker's name (its consumer name in the group).
	ID string
	// Held counts the agents it held at its last heartbeat.
	Held int
	// Beat is its last heartbeat.
	Beat time.Time
	// Alive is false once its heartbeat expired (its TTL passed without a
	// new one).
	Alive bool
}

// beat is a worker's entry in the workers hash.
type beat struct {
	Held int   `json:"held"`
	Beat int64 `json:"beat"` // unix ms
}

// Beat records worker's heartbeat: it is alive, and holds held agents, for
// ttl (a key that expires after ttl, and an entry of the workers hash that
// [Client.Workers] lists).
func (c *Client) Beat(ctx context.Context, worker string, held int, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("queue: beat of worker %q: ttl %v, want > 0", worker, ttl)
	}
	b, err := json.Marshal(beat{Held: held, Beat: time.Now().UnixMilli()})
	if err != nil {
		return fmt.Errorf("queue: beat of worker %q: %w", worker, err)
	}
	_, err = c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c.workerKey(worker), held, max(ttl, time.Millisecond))
		p.HSet(ctx, c.workersKey(), worker, b)
		return nil
	})
	if err != nil {
		return c.fail(fmt.Sprintf("beat of worker %q", worker), err)
	}
	return nil
}

// Leave removes worker's heartbeat: it stopped gracefully and is no longer
// listed.
func (c *Client) Leave(ctx context.Context, worker string) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, c.workerKey(worker))
		p.HDel(ctx, c.workersKey(), worker)
		return nil
	})
	if err != nil {
		return c.fail(fmt.Sprintf("leave of worker %q", worker), err)
	}
	return nil
}

// Workers returns the workers that beat, sorted by ID: live ones, and dead
// ones (heartbeat expired, Alive false) until [ForgetAfter] after their
// last heartbeat, when Workers forgets them.
func (c *Client) Workers(ctx context.Context) ([]WorkerStatus, error) {
	h, err := c.rdb.HGetAll(ctx, c.workersKey()).Result()
	if err != nil {
		return nil, c.fail("list workers", err)
	}
	ids := slices.Sorted(maps.Keys(h))
	alive := make([]*redis.IntCmd, len(ids))
	_, err = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			alive[i] = p.Exists(ctx, c.workerKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, c.fail("list workers", err)
	}
	var out []WorkerStatus
	var forget []string
	now := time.Now()
	for i, id := range ids {
		var b beat
		if err := json.NewDecoder(strings.NewReader(h[id])).Decode(&b); err != nil {
			return nil, fmt.Errorf("queue: list workers: worker %q: bad entry %q", id, h[id])
		}
		ws := WorkerStatus{ID: id, Held: b.Held, Beat: time.UnixMilli(b.Beat), Alive: alive[i].Val() == 1}
		if !ws.Alive && now.Sub(ws.Beat) > ForgetAfter {
			forget = append(forget, id)
			continue
		}
		out = append(out, ws)
	}
	if len(forget) > 0 {
		if err := c.rdb.HDel(ctx, c.workersKey(), forget...).Err(); err != nil {
			return nil, c.fail("forget dead workers", err)
		}
	}
	return out, nil
}
