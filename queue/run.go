package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run is one run of a job over its inputs, shared by a coordinator and
// any number of workers.
type Run struct {
	// ID names the run; it is also the job ID under which its agents'
	// states are checkpointed. Any string but "" (keys tag it, so IDs
	// holding ":" do not collide).
	ID string
	// Job is the job file's bytes, as read (YAML); workers parse it.
	Job []byte
	// JobPath is the job file's absolute path on the coordinator's host.
	JobPath string
	// NoCache turns the response cache off on the workers (the
	// coordinator's --no-cache): every model call is paid. A run keeps
	// the NoCache it was created with.
	NoCache bool
	// Created is when the run was created. Zero means now (CreateRun sets
	// it).
	Created time.Time
}

// RunStatus is a run and its progress.
type RunStatus struct {
	Run
	// Enqueued counts the inputs enqueued so far: indexes 0..Enqueued-1.
	Enqueued int
	// Total counts all inputs once the coordinator has read them all
	// (SetTotal); -1 until then.
	Total int
	// Done counts the results recorded.
	Done int
	// Coordinator is the coordinator's last heartbeat; zero when never.
	Coordinator time.Time
	// Finished is Total >= 0 && Done >= Total.
	Finished bool
}

// Fields of a run's hash.
const (
	fJob       = "job"
	fJobPath   = "job_path"
	fCreated   = "created"
	fEnqueued  = "enqueued"
	fTotal     = "total"
	fDone      = "done"
	fCoordBeat = "coord_beat"
	fNoCache   = "no_cache"
)

// createScript registers a run unless its hash exists: KEYS run hash,
// runs set; ARGV id, job, job path, created (RFC 3339), created (unix ms),
// no cache ("1" or "0").
// It returns 1 when it created the run, 0 when it existed.
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'job', ARGV[2], 'job_path', ARGV[3], 'created', ARGV[4],
	'enqueued', 0, 'total', -1, 'done', 0, 'no_cache', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
return 1
`)

// setScript sets field ARGV[1] of hash KEYS[1] to ARGV[2] when the hash
// exists; it returns 0 when it does not.
var setScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// CreateRun registers r. When a run with r.ID exists it changes nothing
// and returns that run's status with existed true; otherwise it returns the
// new run's status (Total -1, nothing enqueued).
func (c *Client) CreateRun(ctx context.Context, r Run) (st RunStatus, existed bool, err error) {
	if r.ID == "" {
		return RunStatus{}, false, errors.New("queue: create run: empty run ID")
	}
	if r.Created.IsZero() {
		r.Created = time.Now()
	}
	noCache := "0"
	if r.NoCache {
		noCache = "1"
	}
	n, err := createScript.Run(ctx, c.rdb, []string{c.runKey(r.ID), c.runsKey()},
		r.ID, r.Job, r.JobPath, r.Created.Format(time.RFC3339Nano), r.Created.UnixMilli(), noCache).Int()
	if err != nil {
		return RunStatus{}, false, c.fail(fmt.Sprintf("create run %q", r.ID), err)
	}
	st, err = c.RunStatus(ctx, r.ID)
	return st, n == 0, err
}

// RunStatus returns the status of run id, or an error wrapping [ErrNoRun]
// when there is none.
func (c *Client) RunStatus(ctx context.Context, id string) (RunStatus, error) {
	h, err := c.rdb.HGetAll(ctx, c.runKey(id)).Result()
	if err != nil {
		return RunStatus{}, c.fail(fmt.Sprintf("run %q status", id), err)
	}
	if len(h) == 0 {
		return RunStatus{}, fmt.Errorf("run %q: %w", id, ErrNoRun)
	}
	return parseRun(id, h)
}

// parseRun reads a run's hash.
func parseRun(id string, h map[string]string) (RunStatus, error) {
	st := RunStatus{Run: Run{ID: id, Job: []byte(h[fJob]), JobPath: h[fJobPath], NoCache: h[fNoCache] == "1"}}
	var err error
	if st.Created, err = time.Parse(time.RFC3339Nano, h[fCreated]); err != nil {
		return RunStatus{}, fmt.Errorf("queue: run %q: bad created time %q", id, h[fCreated])
	}
	for _, f := range []struct {
		name string
		to   *int
	}{{fEnqueued, &st.Enqueued}, {fTotal, &st.Total}, {fDone, &st.Done}} {
		if *f.to, err = strconv.Atoi(h[f.name]); err != nil {
			return RunStatus{}, fmt.Errorf("queue: run %q: bad %s %q", id, f.name, h[f.name])
		}
	}
	if b := h[fCoordBeat]; b != "" {
		ms, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return RunStatus{}, fmt.Errorf("queue: run %q: bad coordinator beat %q", id, b)
		}
		st.Coordinator = time.UnixMilli(ms)
	}
	st.Finished = st.Total >= 0 && st.Done >= st.Total
	return st, nil
}

// Runs returns the status of every run, oldest first.
func (c *Client) Runs(ctx context.Context) ([]RunStatus, error) {
	ids, err := c.rdb.ZRange(ctx, c.runsKey(), 0, -1).Result()
	if err != nil {
		return nil, c.fail("list runs", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, c.runKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, c.fail("list runs", err)
	}
	out := make([]RunStatus, 0, len(ids))
	for i, id := range ids {
		h := cmds[i].Val()
		if len(h) == 0 {
			continue // deleted meanwhile
		}
		st, err := parseRun(id, h)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// SetTotal records that run id has total inputs in all. It returns an
// error wrapping [ErrNoRun] for an unknown run.
func (c *Client) SetTotal(ctx context.Context, id string, total int) error {
	if total < 0 {
		return fmt.Errorf("queue: set total of run %q: negative total %d", id, total)
	}
	return c.setField(ctx, id, "set total", fTotal, total)
}

// CoordinatorBeat records the coordinator's heartbeat (now) on run id. It
// returns an error wrapping [ErrNoRun] for an unknown run.
func (c *Client) CoordinatorBeat(ctx context.Context, id string) error {
	return c.setField(ctx, id, "coordinator beat", fCoordBeat, time.Now().UnixMilli())
}

func (c *Client) setField(ctx context.Context, id, op, field string, v any) error {
	n, err := setScript.Run(ctx, c.rdb, []string{c.runKey(id)}, field, v).Int()
	if err != nil {
		return c.fail(fmt.Sprintf("%s of run %q", op, id), err)
	}
	if n == 0 {
		return fmt.Errorf("queue: %s of run %q: %w", op, id, ErrNoRun)
	}
	return nil
}

// DeleteRun removes run id and all its keys: its hash, results, results
// stream and checkpointed states. Its tasks left in the task stream stay
// there; workers that meet them find the run gone, and ack and drop them.
// Deleting an unknown run is not an error.
func (c *Client) DeleteRun(ctx context.Context, id string) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, c.runKey(id), c.resultsKey(id), c.outKey(id), c.stateKey(id))
		p.ZRem(ctx, c.runsKey(), id)
		return nil
	})
	if err != nil {
		return c.fail(fmt.Sprintf("delete run %q", id), err)
	}
	return nil
}
