package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
)

// Defaults of [WorkerConfig].
const (
	// DefaultMaxActive is the agents a worker holds at once when
	// [WorkerConfig.MaxActive] is 0.
	DefaultMaxActive = 64
	// DefaultVisibility is [WorkerConfig.Visibility] when it is 0.
	DefaultVisibility = 30 * time.Second
)

// redisOpTimeout bounds each Redis call a worker or coordinator makes
// outside its read loop (recording a result, acknowledging, releasing,
// heartbeats), so that a Redis that stopped answering cannot hold a
// stopping worker forever.
const redisOpTimeout = 10 * time.Second

// runIdle is how long a run's engine stays open on a worker after its
// last task started, when none of its tasks is held: a long-lived worker
// closes the engines and tools of runs that are over.
const runIdle = 5 * time.Minute

// Job is a run's job opened on a worker: what [WorkerConfig.Open] returns.
type Job struct {
	// Config is the engine's configuration. The worker sets its Checkpoint
	// to the Client's [Client.Checkpointer] (so that another worker
	// continues an agent from its last turn) and its MaxActive to the
	// worker's, then builds the engine with [batchagent.New].
	Config batchagent.Config
	// Spec is the job every task of the run runs, at the task's index.
	Spec *batchagent.Spec
	// Close, if set, releases what Open opened (tools, shared limits). The
	// worker calls it once the run's engine is shut down, or when the
	// engine could not be built.
	Close func() error
	// Agent, if set, is called as each of the run's agents starts here,
	// with the context it is started under and its index: it returns the
	// context to start it under (carrying, say, a per-agent counter that
	// the job's model wrappers fill) and a function that completes the
	// agent's result before it is recorded (called once, from the agent's
	// goroutine; not for an agent released to another worker). It is
	// how a job adds what it counts per agent, such as the calls its
	// response cache answered, to the result lines.
	Agent func(ctx context.Context, index int) (context.Context, func(*batchagent.Result))
}

// WorkerConfig configures a [Worker]. Client and Open are required.
type WorkerConfig struct {
	// Client is the queue the worker serves. The worker does not close it.
	Client *Client
	// ID names the worker: its consumer in the task group, and its entry in
	// [Client.Workers]. Defaults to HOST-PID.
	ID string
	// MaxActive is the agents held at once. Defaults to [DefaultMaxActive].
	MaxActive int
	// Visibility is the visibility timeout: the tasks of a worker silent
	// this long are reclaimed by others. The worker touches its tasks three
	// times as often. Defaults to [DefaultVisibility]; at least 1s.
	Visibility time.Duration
	// Grace is how long, once Run's ctx ends, the turns in flight may
	// finish before the agents are stopped (and their tasks released).
	// Zero stops them at once.
	Grace time.Duration
	// Open opens the job of run on first use of one of its tasks: its
	// engine configuration and Spec. It is called from Run's goroutine
	// with a context that ends when the worker stops its agents. An error
	// leaves the run's tasks to other workers; Open is tried again for the
	// run after the visibility timeout.
	Open func(ctx context.Context, run RunStatus) (Job, error)
	// Logger receives the worker's warnings and its runs opened and
	// closed, with the attribute worker=ID. Defaults to the Client's.
	Logger *slog.Logger
}

// WorkerStats counts what a worker did; see [Worker.Stats].
type WorkerStats struct {
	// Recorded counts the results this worker recorded first.
	Recorded int64
	// Released counts the tasks handed back unfinished.
	Released int64
	// Unreleased counts the tasks held at the end that could not be
	// released: other workers take them after the visibility timeout.
	Unreleased int64
}

// Worker runs the tasks of any run in the queue: up to MaxActive agents at
// once, each on the engine of its run (one per run, built from what Open
// returns). Create one with [NewWorker] and call [Worker.Run], which blocks
// until its context ends (or [Worker.StopNow]) and the worker has stopped.
type Worker struct {
	cfg    WorkerConfig
	q      *Client
	logger *slog.Logger

	runs map[string]*workerRun // by run ID; owned by Run's read loop

	mu   sync.Mutex      // protects held
	held map[string]Task // the tasks running here, by entry ID

	// freed tells the read loop that a task ended (capacity 1: one
	// pending signal is enough).
	freed   chan struct{}
	agents  sync.WaitGroup // the goroutines waiting for the agents' results
	stopNow chan struct{}  // closed by StopNow
	once    sync.Once      // closes stopNow

	recorded, released, unreleased atomic.Int64
}

// workerRun is a run as a worker runs it: its job on an engine of its
// own, so that each job keeps its admission settings (max_inflight, rate
// limits), all checkpointing into the queue. A run whose job could not be
// opened here keeps the error until retry.
type workerRun struct {
	spec   *batchagent.Spec
	engine *batchagent.Engine
	close  func() error                                                           // Job.Close; nil when none
	agent  func(context.Context, int) (context.Context, func(*batchagent.Result)) // Job.Agent; nil when none
	err    error                                                                  // why the job could not be opened; nil when it was
	retry  time.Time                                                              // when to try opening a failed job again
	used   time.Time                                                              // when a task of the run last started here
}

// NewWorker checks cfg, fills in its defaults and returns a worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("queue: worker: no Client")
	case cfg.Open == nil:
		return nil, errors.New("queue: worker: no Open")
	case cfg.MaxActive < 0:
		return nil, fmt.Errorf("queue: worker: MaxActive %d: want at least 1", cfg.MaxActive)
	case cfg.Visibility != 0 && cfg.Visibility < time.Second:
		return nil, fmt.Errorf("queue: worker: Visibility %s: want at least 1s", cfg.Visibility)
	case cfg.Grace < 0:
		return nil, fmt.Errorf("queue: worker: Grace %s: want 0 or more", cfg.Grace)
	}
	if cfg.ID == "" {
		host, _ := os.Hostname() // "" is fine: the pid still names the process
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.MaxActive == 0 {
		cfg.MaxActive = DefaultMaxActive
	}
	if cfg.Visibility == 0 {
		cfg.Visibility = DefaultVisibility
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Client.log
	}
	return &Worker{
		cfg: cfg, q: cfg.Client, logger: cfg.Logger.With("worker", cfg.ID),
		runs: map[string]*workerRun{}, held: map[string]Task{},
		freed: make(chan struct{}, 1), stopNow: make(chan struct{}),
	}, nil
}

// ID returns the worker's name.
func (w *Worker) ID() string { return w.cfg.ID }

// Stats returns what the worker did so far. It is safe to call at any
// time, from any goroutine.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{Recorded: w.recorded.Load(), Released: w.released.Load(), Unreleased: w.unreleased.Load()}
}

// StopNow stops a worker at once: its agents are stopped in the turns they
// are in and their tasks released, as if Grace were over. It is safe to
// call at any time, from any goroutine, and more than once.
func (w *Worker) StopNow() { w.once.Do(func() { close(w.stopNow) }) }

// Run serves the queue and blocks until ctx ends (or [Worker.StopNow]):
// it heartbeats, reads and reclaims tasks while it holds fewer than
// MaxActive, runs each task's agent, touches the tasks it holds, records
// each result and acknowledges its task. Once ctx ends it stops reading,
// lets the turns in flight finish for up to Grace (still recording the
// results that come), stops the agents left (their tasks are released, to
// be continued elsewhere from their last turn), closes its runs' engines,
// releases what it still holds and leaves the workers' list. Its error is
// that of leaving. Call Run once.
func (w *Worker) Run(ctx context.Context) error {
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	// agentCtx outlives the read loop: the agents finish their turns in
	// flight after it ends. StopNow cancels it.
	agentCtx, stopAgents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgents()
	done := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // StopNow's watcher; ends at done
		select {
		case <-w.stopNow:
			stopReading()
			stopAgents()
		case <-done:
		}
	})
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	bg.Go(func() { w.heartbeat(beatCtx) })

	w.loop(readCtx, agentCtx)

	// Drain: the engines stop admitting turns and wait for those in
	// flight; the agents they stop end canceled and are released.
	graceCtx, cancelGrace := context.WithTimeout(agentCtx, w.cfg.Grace)
	var shut sync.WaitGroup
	for _, r := range w.runs {
		if r.engine != nil {
			shut.Go(func() { _ = r.engine.Shutdown(graceCtx) }) // the results say which agents were stopped
		}
	}
	shut.Wait()
	cancelGrace()
	w.agents.Wait()
	for _, r := range w.runs {
		w.closeRun(r)
	}
	stopBeats()
	close(done)
	bg.Wait()
	w.releaseHeld()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisOpTimeout)
	defer cancel()
	return w.q.Leave(lctx, w.cfg.ID)
}

// closeRun calls the Close of run r's job, if any.
func (w *Worker) closeRun(r *workerRun) {
	if r.close == nil {
		return
	}
	if err := r.close(); err != nil {
		w.logger.Warn("closing tools", "err", err)
	}
}

// loop reads tasks while it has room, and reclaims the tasks of workers
// that went silent, until ctx ends. Agents run under agentCtx.
func (w *Worker) loop(ctx, agentCtx context.Context) {
	reclaim := every{d: max(w.cfg.Visibility/3, time.Second)}
	for ctx.Err() == nil {
		free := w.cfg.MaxActive - w.heldCount()
		if free <= 0 {
			select {
			case <-w.freed:
			case <-ctx.Done():
			}
			continue
		}
		var tasks []Task
		if reclaim.due() {
			got, err := w.q.Reclaim(ctx, w.cfg.ID, w.cfg.Visibility, free)
			if err != nil && ctx.Err() == nil {
				w.logger.Warn("reclaim", "err", err)
			}
			tasks = got
		}
		if len(tasks) < free {
			got, err := w.q.Read(ctx, w.cfg.ID, free-len(tasks), time.Second)
			if err != nil && ctx.Err() == nil {
				w.logger.Warn("read tasks", "err", err)
				pause(ctx, time.Second) // Redis away: do not spin
			}
			tasks = append(tasks, got...)
		}
		for _, t := range tasks {
			w.start(agentCtx, t)
		}
		w.closeIdle(ctx)
	}
}

// closeIdle shuts down the engines, and closes the jobs, of the runs with
// no task held here that started none for runIdle.
func (w *Worker) closeIdle(ctx context.Context) {
	w.mu.Lock()
	busy := map[string]bool{}
	for _, t := range w.held {
		busy[t.Run] = true
	}
	w.mu.Unlock()
	for id, r := range w.runs {
		if busy[id] || time.Since(r.used) < runIdle || r.err != nil {
			continue
		}
		delete(w.runs, id)
		_ = r.engine.Shutdown(ctx) // nothing in flight: it returns at once
		w.closeRun(r)
		w.logger.Info("run closed: idle", "job", id)
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// start runs task t: its run's agent at its index, continuing from the
// agent's checkpointed turns. A placeholder (the input JSON null: an
// input the coordinator could not decode, whose result it recorded) and
// a task of a run that no longer exists are acknowledged and dropped. A
// task of a run whose job cannot be opened here is left pending, not
// held: it is reclaimed after the visibility timeout, here or elsewhere.
func (w *Worker) start(ctx context.Context, t Task) {
	if bytes.Equal(bytes.TrimSpace(t.Input), []byte("null")) {
		w.ack(t)
		return
	}
	r, err := w.run(ctx, t.Run)
	if errors.Is(err, ErrNoRun) {
		w.ack(t)
		return
	}
	if err != nil {
		return // logged once per attempt to open the job
	}
	if !w.hold(t) {
		return // reclaimed from itself (a touch came late): it runs here already
	}
	r.used = time.Now()
	var in batchagent.Input
	dec := json.NewDecoder(bytes.NewReader(t.Input))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil || in == nil {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		w.agents.Go(func() { w.finish(t, inputFailure(t.Run, t.Index, fmt.Errorf("task input: %w", err))) })
		return
	}
	actx, complete := ctx, func(*batchagent.Result) {}
	if r.agent != nil {
		actx, complete = r.agent(ctx, t.Index)
	}
	h := r.engine.Agent(actx, r.spec, t.Index, in)
	w.agents.Go(func() {
		res, _ := h.Wait(context.WithoutCancel(ctx)) // the engine ends every Handle
		if !releasable(res.Err) {
			complete(&res)
		}
		w.finish(t, res)
	})
}

// inputFailure is the result of an input that could not be decoded, as a
// run reports one: kind input, no turn.
func inputFailure(run string, index int, err error) batchagent.Result {
	return batchagent.Result{
		Index:   index,
		Err:     &batchagent.AgentError{JobID: run, Agent: index, Turn: -1, Op: "input", Kind: batchagent.KindInput, Err: err},
		Started: time.Now(),
	}
}

// run returns the worker's engine and Spec of run id, opening its job
// with Open on first use. The error wraps ErrNoRun when the run is gone.
func (w *Worker) run(ctx context.Context, id string) (*workerRun, error) {
	if r, ok := w.runs[id]; ok && (r.err == nil || time.Now().Before(r.retry)) {
		return r, r.err
	}
	r, err := w.openRun(ctx, id)
	if errors.Is(err, ErrNoRun) {
		return nil, err
	}
	if err != nil {
		w.logger.Error("cannot open the run's job: its tasks are left for other workers (retried here after the visibility timeout)", "job", id, "err", err)
		r = &workerRun{err: err, retry: time.Now().Add(w.cfg.Visibility)}
	}
	w.runs[id] = r
	return r, err
}

// openRun opens run id's job; see run.
func (w *Worker) openRun(ctx context.Context, id string) (*workerRun, error) {
	st, err := w.q.RunStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	j, err := w.cfg.Open(ctx, st)
	if err != nil {
		return nil, err
	}
	r := &workerRun{spec: j.Spec, close: j.Close, agent: j.Agent}
	j.Config.MaxActive = w.cfg.MaxActive
	j.Config.Checkpoint = w.q.Checkpointer()
	if r.engine, err = batchagent.New(j.Config); err != nil {
		if r.close != nil {
			_ = r.close() // the setup error is the one to report
		}
		return nil, fmt.Errorf("%s: %w", st.JobPath, err)
	}
	w.logger.Info("run opened", "job", id, "path", st.JobPath)
	return r, nil
}

// finish records the result of task t and acknowledges it, or, for an
// agent stopped by the worker's shutdown (or failed by Redis: see
// releasable), releases it so that another worker continues it from its
// last checkpointed turn. A task whose result could not be recorded stays
// pending: it is reclaimed after the visibility timeout.
func (w *Worker) finish(t Task, res batchagent.Result) {
	defer w.unhold(t)
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	defer cancel()
	if releasable(res.Err) {
		if err := w.q.Release(ctx, w.cfg.ID, t); err != nil {
			w.logger.Warn("release task: it is taken again after the visibility timeout", "job", t.Run, "agent", t.Index, "err", err)
		} else {
			w.released.Add(1)
		}
		return
	}
	line, err := json.Marshal(res)
	if err != nil {
		// Result.MarshalJSON marshals plain values; record what failed.
		line, _ = json.Marshal(inputFailure(t.Run, t.Index, fmt.Errorf("encode result: %w", err)))
	}
	first, err := w.q.Record(ctx, t.Run, t.Index, line)
	switch {
	case errors.Is(err, ErrNoRun):
	case err != nil:
		w.logger.Error("record result: the task is taken again after the visibility timeout", "job", t.Run, "agent", t.Index, "err", err)
		return
	case first:
		w.recorded.Add(1)
	}
	w.ackCtx(ctx, t)
}

// ack acknowledges t with a bounded wait.
func (w *Worker) ack(t Task) {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	defer cancel()
	w.ackCtx(ctx, t)
}

func (w *Worker) ackCtx(ctx context.Context, t Task) {
	if err := w.q.Ack(ctx, t); err != nil {
		w.logger.Warn("ack task: its result is recorded; a worker that takes it again records nothing new", "job", t.Run, "agent", t.Index, "err", err)
	}
}

// releasable reports whether a result's error is the worker's or Redis's
// rather than the agent's, so that its task is released for another try
// instead of recorded for good: the agent was stopped by the shutdown, its
// state could not be saved or loaded, or a limit shared in Redis stayed
// unreachable for the agent's whole outage budget (shorter outages, a
// Redis restart or failover, the agent waits out).
func releasable(err error) bool {
	if err == nil {
		return false
	}
	if batchagent.KindOf(err) == batchagent.KindCanceled || errors.Is(err, batchagent.ErrCheckpoint) || errors.Is(err, ErrSharedLimit) {
		return true
	}
	ae, ok := errors.AsType[*batchagent.AgentError](err)
	return ok && ae.Op == "checkpoint"
}
