package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
)

// DefaultWindow is [CoordinatorConfig.Window] when it is 0: the inputs
// enqueued but without a result at most, so that a run of millions never
// fills Redis.
const DefaultWindow = 1000

// coordEvery is how often the coordinator heartbeats and reports its
// progress.
const coordEvery = 2 * time.Second

// CoordinatorConfig configures a [Coordinator]. Client, Run.ID, Inputs and
// Sink are required.
type CoordinatorConfig struct {
	// Client is the queue the run goes through. The coordinator does not
	// close it.
	Client *Client
	// Run is the run to register (ID, the job file's bytes and path, which
	// the workers open) and to follow.
	Run Run
	// Inputs returns the run's inputs from the first. It is called again
	// when the run must be enqueued anew (Redis lost it), and by
	// [Coordinator.Retry]. An input that yields an error is a result: its
	// failure (kind input) is recorded instead of running it.
	Inputs func() (batchagent.Inputs, error)
	// Window is the inputs enqueued and without a result at most.
	// Defaults to [DefaultWindow].
	Window int
	// OutageBudget bounds how long a Redis operation is tried again while
	// Redis cannot be reached. Defaults to
	// [batchagent.DefaultOutageBudget].
	OutageBudget time.Duration
	// Written holds the indexes whose results the caller's output holds
	// already (a resumed run): they are not handed to Sink again. Run adds
	// each index it hands to Sink; do not use the set while Run runs. Nil
	// means none.
	Written *IndexSet
	// Sink takes each batch of results read from Redis, in the order they
	// were recorded, each input's once: it writes them out (the caller
	// owns the output). An error ends Run with it.
	Sink func([]Collected) error
	// Progress, if set, is called from Run's goroutine about every 2 s
	// with the run's progress.
	Progress func(CoordinatorStats)
	// Warn, if set, receives one line for each thing the coordinator
	// waits out or recovers from: a Redis outage (once per spell), a
	// failed heartbeat or read, a lost run registered again.
	Warn func(msg string)
}

// Collected is one result the coordinator collected for its Sink.
type Collected struct {
	// Index is the input's position in the run's inputs.
	Index int
	// Line is the result's JSON line, without its newline.
	Line []byte
	// Usage is the line's tokens; zero when Decoded is false.
	Usage llm.Usage
	// Decoded is false for a line that is not a result's JSON.
	Decoded bool
}

// CoordinatorStats is a run's progress as its coordinator sees it.
type CoordinatorStats struct {
	// Written counts the indexes the output holds: Config.Written and the
	// results collected.
	Written int
	// Enqueued counts the inputs enqueued; Total all of them, once all are
	// enqueued (-1 until then).
	Enqueued, Total int
	// OK and Failed count the results collected by this Run (that
	// decoded); FailedByKind the failed ones by error kind.
	OK, Failed   int
	FailedByKind map[string]int
	// ModelCalls, Turns and ToolCalls sum the results collected; Usage
	// sums their tokens, cached ones included, for the cost.
	ModelCalls, Turns, ToolCalls int64
	Usage                        llm.Usage
}

// Coordinator enqueues a run's inputs within a window, follows the
// results the workers record and hands each to a sink once, heartbeating
// on the run, waiting out Redis outages (up to the outage budget) and
// registering the run again if Redis loses it. Create one with
// [NewCoordinator] and call [Coordinator.Run], which blocks until every
// input has its result, or its context ends, or it fails.
type Coordinator struct {
	cfg        CoordinatorConfig
	q          *Client
	start      int       // inputs enqueued already (a resumed run)
	registered bool      // Register was called
	written    *IndexSet // Config.Written
	// inputs are the inputs Run enqueues from start.
	inputs batchagent.Inputs
	// skip are the inputs whose lines the output held when the run was
	// enqueued again after Redis lost it: each is enqueued as a
	// placeholder (null), which workers drop, so that the run's indexes
	// stay contiguous without running them again. Nil otherwise.
	skip *IndexSet

	seen     atomic.Int64 // distinct results read from the run since it was registered
	enqueued atomic.Int64
	total    atomic.Int64 // the inputs, once all are enqueued; -1 until then
	// progress tells the enqueuer that results came (capacity 1: one
	// pending signal is enough).
	progress chan struct{}

	mu    sync.Mutex // protects stats
	stats CoordinatorStats
}

// NewCoordinator checks cfg, fills in its defaults and returns a
// coordinator.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("queue: coordinator: no Client")
	case cfg.Run.ID == "":
		return nil, errors.New("queue: coordinator: empty run ID")
	case cfg.Inputs == nil:
		return nil, errors.New("queue: coordinator: no Inputs")
	case cfg.Sink == nil:
		return nil, errors.New("queue: coordinator: no Sink")
	case cfg.Window < 0:
		return nil, fmt.Errorf("queue: coordinator: Window %d: want at least 1", cfg.Window)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.OutageBudget <= 0 {
		cfg.OutageBudget = batchagent.DefaultOutageBudget
	}
	if cfg.Written == nil {
		cfg.Written = &IndexSet{}
	}
	c := &Coordinator{cfg: cfg, q: cfg.Client, written: cfg.Written, progress: make(chan struct{}, 1)}
	c.total.Store(-1)
	return c, nil
}

// Register registers the run, or finds it registered (existed true: a
// resumed run, whose inputs are enqueued from st.Enqueued on). A caller
// that resumes checks that st.Job is its job. Run registers the run if
// Register was not called.
func (c *Coordinator) Register(ctx context.Context) (st RunStatus, existed bool, err error) {
	r := c.cfg.Run
	if r.Created.IsZero() {
		r.Created = time.Now()
	}
	st, existed, err = c.q.CreateRun(ctx, r)
	if err != nil {
		return RunStatus{}, false, err
	}
	c.start, c.registered = st.Enqueued, true
	c.enqueued.Store(int64(st.Enqueued))
	return st, existed, nil
}

// Stats returns the run's progress. It is safe to call at any time, from
// any goroutine.
func (c *Coordinator) Stats() CoordinatorStats {
	c.mu.Lock()
	s := c.stats
	s.FailedByKind = maps.Clone(s.FailedByKind)
	s.Written = c.written.Len()
	c.mu.Unlock()
	s.Enqueued, s.Total = int(c.enqueued.Load()), int(c.total.Load())
	return s
}

// Run enqueues the run's inputs and hands their results to Sink, and
// blocks until every input has its result in the output (Written), or ctx
// ends (it returns ctx's error; the run goes on on the workers, and a Run
// of a new Coordinator of the same run resumes it), or Sink fails, or
// Redis stays unreachable for the outage budget. A run that Redis lost
// (restarted without its data, flushed, evicted) is registered again and
// its inputs without a result in Written are enqueued anew.
func (c *Coordinator) Run(ctx context.Context) error {
	if !c.registered {
		if _, _, err := c.Register(ctx); err != nil {
			return err
		}
	}
	if c.inputs == nil {
		in, err := c.cfg.Inputs()
		if err != nil {
			return err
		}
		c.inputs = in
	}
	for {
		lost, err := c.follow(ctx)
		if !lost || err != nil || ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			return err
		}
		c.warn(fmt.Sprintf("run %s is gone from Redis (restarted without its data, flushed or evicted): registering it again and enqueuing the inputs without a line in the output (%d have one)", c.cfg.Run.ID, c.written.Len()))
		if err := c.reenqueue(ctx); err != nil {
			return fmt.Errorf("run %s is gone from Redis and could not be registered again: %w", c.cfg.Run.ID, err)
		}
	}
}

func (c *Coordinator) warn(msg string) {
	if c.cfg.Warn != nil {
		c.cfg.Warn(msg)
	}
}

// reenqueue registers the run again after Redis lost it and starts its
// inputs over from the first: the ones written already (a snapshot of
// Written) are enqueued as placeholders, the others as tasks.
func (c *Coordinator) reenqueue(ctx context.Context) error {
	err := c.redis(ctx, "register the run again", func() error {
		r := c.cfg.Run
		r.Created = time.Now()
		_, _, err := c.q.CreateRun(ctx, r)
		return err
	})
	if err != nil {
		return err
	}
	in, err := c.cfg.Inputs()
	if err != nil {
		return err
	}
	c.inputs, c.start, c.skip = in, 0, c.written.Clone()
	c.seen.Store(0) // the results seen before are skipped: they are in Written
	c.enqueued.Store(0)
	c.total.Store(-1)
	return nil
}

// redis runs op, a Redis operation of the coordinator, and runs it again
// while it fails (Redis down, restarting, loading its data), for up to
// the outage budget: a blip stops nothing. It returns op's error when it
// wraps ErrNoRun (the run is gone: trying again cannot help), when ctx
// ends, or once the budget is spent. what names the operation in the
// warning given once per outage.
func (c *Coordinator) redis(ctx context.Context, what string, op func() error) error {
	var since time.Time
	for {
		err := op()
		if err == nil || errors.Is(err, ErrNoRun) || ctx.Err() != nil {
			return err
		}
		if since.IsZero() {
			since = time.Now()
			c.warn(fmt.Sprintf("warning: %s: %v: trying again for up to %v", what, err, c.cfg.OutageBudget))
		} else if time.Since(since) >= c.cfg.OutageBudget {
			return fmt.Errorf("%s: Redis unavailable for %v (the outage budget): %w", what, c.cfg.OutageBudget.Round(time.Second), err)
		}
		pause(ctx, 500*time.Millisecond)
	}
}

// follow enqueues the inputs and collects the results until every input
// has its line in the output, or ctx ends, or an error. lost reports that
// Redis lost the run: the caller registers it again and follows once
// more.
func (c *Coordinator) follow(ctx context.Context) (lost bool, err error) {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the enqueuer may wait on the window
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enqErr := make(chan error, 1) // the enqueuer's one result
	wg.Go(func() { enqErr <- c.enqueue(ctx) })

	var seen IndexSet
	cursor := "0"
	beat := every{d: coordEvery}
	for {
		if total := int(c.total.Load()); total >= 0 && c.written.Len() >= total && c.written.CountBelow(total) == total {
			return false, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
		select {
		case err := <-enqErr:
			if errors.Is(err, ErrNoRun) {
				return true, nil
			} else if err != nil && ctx.Err() == nil {
				return false, err
			}
		default:
		}
		if beat.due() {
			if err := c.q.CoordinatorBeat(ctx, c.cfg.Run.ID); errors.Is(err, ErrNoRun) {
				// Deleted, flushed, evicted or a Redis restarted without
				// its data: its tasks and results are gone with it, and
				// nothing would ever finish it.
				return true, nil
			} else if err != nil && ctx.Err() == nil {
				c.warn(fmt.Sprint("warning: heartbeat: ", err))
			}
			if c.cfg.Progress != nil {
				c.cfg.Progress(c.Stats())
			}
		}
		recs, err := c.q.Results(ctx, c.cfg.Run.ID, cursor, 512, time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			c.warn(fmt.Sprint("warning: reading results: ", err))
			pause(ctx, time.Second)
			continue
		}
		var batch []Collected
		for _, rec := range recs {
			cursor = rec.Cursor
			if rec.Index < 0 || !seen.Add(rec.Index) {
				continue
			}
			c.seen.Add(1)
			c.mu.Lock()
			isNew := c.written.Add(rec.Index)
			c.mu.Unlock()
			if !isNew {
				continue
			}
			col := Collected{Index: rec.Index, Line: bytes.TrimRight(rec.Line, "\n")}
			col.Usage, col.Decoded = c.count(col.Line)
			batch = append(batch, col)
		}
		if len(batch) > 0 {
			if err := c.cfg.Sink(batch); err != nil {
				return false, err
			}
		}
		if len(recs) > 0 {
			select {
			case c.progress <- struct{}{}:
			default:
			}
		}
	}
}

// count adds one result line to the stats and returns its usage; a line
// that does not decode counts as nothing and has none.
func (c *Coordinator) count(line []byte) (llm.Usage, bool) {
	var l struct {
		Error *struct {
			Kind string `json:"kind"`
		} `json:"error"`
		ModelCalls int64     `json:"model_calls"`
		Turns      int64     `json:"turns"`
		ToolCalls  int64     `json:"tool_calls"`
		Usage      llm.Usage `json:"usage"`
	}
	if json.Unmarshal(line, &l) != nil {
		return llm.Usage{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.stats
	if l.Error != nil {
		s.Failed++
		if s.FailedByKind == nil {
			s.FailedByKind = map[string]int{}
		}
		s.FailedByKind[l.Error.Kind]++
	} else {
		s.OK++
	}
	s.ModelCalls += l.ModelCalls
	s.Turns += l.Turns
	s.ToolCalls += l.ToolCalls
	s.Usage = s.Usage.Add(l.Usage)
	return l.Usage, true
}
