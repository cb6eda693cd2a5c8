package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batchagent/batchagent/agent"
)

// Checkpoints keeps agent states in Redis: one hash per job ID (the run's
// ID), field the input index, value the state as JSON. It is a
// batchagent.Checkpointer and a batchagent.StateLoader, safe for concurrent
// use; a state saved by one process is loaded by any other, which is how a
// reclaimed agent continues from its last completed turn.
//
// Final states (done, failed) are kept without their Messages, as
// checkpoint.Store keeps them: the engine reads only their input, results
// and counters.
type Checkpoints struct {
	c *Client
}

// Checkpointer returns the Client's agent-state store.
func (c *Client) Checkpointer() *Checkpoints { return &Checkpoints{c: c} }

// Save records s, replacing any state saved before for its job ID and
// index. When it returns nil, the state is in Redis (durable as far as the
// Redis server's persistence makes it). It does not keep s.
func (cp *Checkpoints) Save(ctx context.Context, s agent.State) error {
	if s.Status != agent.StatusRunning {
		s.Messages = nil // s is a copy: the caller's is unchanged
	} else {
		s.Messages = s.SavedMessages() // media read from files: the reference, not the bytes
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("queue: save state of job %q agent %d: %w", s.JobID, s.Index, err)
	}
	if err := cp.c.rdb.HSet(ctx, cp.c.stateKey(s.JobID), strconv.Itoa(s.Index), data).Err(); err != nil {
		return cp.c.fail(fmt.Sprintf("save state of job %q agent %d", s.JobID, s.Index), err)
	}
	return nil
}

// Load returns the latest saved state of every agent of jobID, ordered by
// index; none for a job never saved.
func (cp *Checkpoints) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	// HSCAN rather than HGETALL: a run's hash may hold millions of states,
	// and one HGETALL of them would stall the Redis every worker shares.
	// HSCAN returns every field present throughout the scan (so every
	// state saved before Load began), possibly twice: seen drops repeats.
	seen := map[string]bool{}
	var out []agent.State
	it := cp.c.rdb.HScan(ctx, cp.c.stateKey(jobID), 0, "", 1000).Iterator()
	for it.Next(ctx) {
		field := it.Val()
		if !it.Next(ctx) {
			break
		}
		if seen[field] {
			continue
		}
		seen[field] = true
		st, err := decodeState(it.Val())
		if err != nil {
			return nil, fmt.Errorf("queue: load state of job %q agent %s: %w", jobID, field, err)
		}
		out = append(out, st)
	}
	if err := it.Err(); err != nil {
		return nil, cp.c.fail(fmt.Sprintf("load states of job %q", jobID), err)
	}
	slices.SortFunc(out, func(a, b agent.State) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}

// LoadState returns the latest saved state of agent index of jobID; ok is
// false when none is saved.
func (cp *Checkpoints) LoadState(ctx context.Context, jobID string, index int) (agent.State, bool, error) {
	v, err := cp.c.rdb.HGet(ctx, cp.c.stateKey(jobID), strconv.Itoa(index)).Result()
	if errors.Is(err, redis.Nil) {
		return agent.State{}, false, nil
	}
	if err != nil {
		return agent.State{}, false, cp.c.fail(fmt.Sprintf("load state of job %q agent %d", jobID, index), err)
	}
	st, err := decodeState(v)
	if err != nil {
		return agent.State{}, false, fmt.Errorf("queue: load state of job %q agent %d: %w", jobID, index, err)
	}
	return st, true, nil
}

// decodeState decodes a saved state, numbers as json.Number so that inputs
// come back exactly.
func decodeState(v string) (agent.State, error) {
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var st agent.State
	if err := agent.DecodeState(dec, &st); err != nil {
		return agent.State{}, err
	}
	return st, nil
}
