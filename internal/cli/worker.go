package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/queue"
	"github.com/batchagent/batchagent/sched"
)

// defaultWorkerActive is a worker's --max-active default: the agents it
// holds at once.
const defaultWorkerActive = 64

// redisOpTimeout bounds each Redis call a worker makes outside its read
// loop (recording a result, acknowledging, releasing, heartbeats), so that
// a Redis that stopped answering cannot hold a stopping worker forever.
const redisOpTimeout = 10 * time.Second

// workerFlags are the flags of `batchagent worker`.
type workerFlags struct {
	redis      string        // --redis: the queue's URL (may hold a password: print only queue.RedactURL's)
	id         string        // --id: the worker's name; "": host-pid
	maxActive  int           // --max-active: agents held at once
	visibility time.Duration // --visibility: how long a silent worker's tasks stay its own
	grace      time.Duration // --grace: how long the first signal waits for the turns in flight
}

// check rejects flag values out of range.
func (f workerFlags) check() error {
	switch {
	case f.redis == "":
		return errors.New("--redis is required: the URL of the Redis that holds the runs, e.g. redis://host:6379")
	case f.maxActive < 1:
		return fmt.Errorf("--max-active %d: want at least 1", f.maxActive)
	case f.visibility < time.Second:
		return fmt.Errorf("--visibility %s: want at least 1s", f.visibility)
	case f.grace < 0:
		return fmt.Errorf("--grace %s: want 0 or more", f.grace)
	}
	return nil
}

// worker runs the tasks of any run in the queue: up to maxActive agents at
// once, each on the engine of its run. Its read loop owns runs; the
// agents' goroutines, which the worker's WaitGroup tracks, share held.
type worker struct {
	q      *queue.Client
	f      workerFlags
	logger *slog.Logger
	stderr io.Writer

	runs map[string]*workerRun // by run ID; owned by the read loop

	mu   sync.Mutex            // protects held
	held map[string]queue.Task // the tasks running here, by entry ID

	// freed tells the read loop that a task ended (capacity 1: one
	// pending signal is enough).
	freed    chan struct{}
	agents   sync.WaitGroup // the goroutines waiting for the agents' results
	recorded atomic.Int64   // results recorded first by this worker
	released atomic.Int64   // tasks handed back unfinished
}

// workerRun is a run as a worker runs it: the run's job built into a
// Spec, on an engine of its own, so that each job keeps its admission
// settings (max_inflight, rate limits), all checkpointing into the queue.
// A run whose job could not be opened here keeps the error until retry.
type workerRun struct {
	spec   *batchagent.Spec
	engine *batchagent.Engine
	tools  *builtTools
	slots  *runSlots // the shared slots its engine took, closed with it
	err    error     // why the job could not be opened; nil when it was
	retry  time.Time // when to try opening a failed job again
	used   time.Time // when a task of the run last started here
}

// runSlots are the shared slot limits a run's engine made (one per
// backend, as it first calls it): closed once the engine is shut down, so
// that their lease renewers stop.
type runSlots struct {
	mu    sync.Mutex // protects slots
	slots []*queue.SharedSlots
}

func (r *runSlots) add(s *queue.SharedSlots) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slots = append(r.slots, s)
}

// close closes the slot limits; their leases still held lapse.
func (r *runSlots) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.slots {
		s.Close()
	}
	r.slots = nil
}

// runIdle is how long a run's engine stays open on a worker after its
// last task started, when none of its tasks is held: a long-lived worker
// closes the engines and tools of runs that are over.
const runIdle = 5 * time.Minute

// runWorker is `batchagent worker`: it serves the queue at f.redis until
// the first SIGINT or SIGTERM, then stops reading, lets the turns in
// flight finish (up to f.grace; a second signal stops at once), releases
// the tasks it still holds and leaves.
func runWorker(ctx context.Context, f workerFlags, logger *slog.Logger, stderr io.Writer) int {
	// Signals are caught from the start. One that comes while the worker
	// connects ends the connecting (it holds nothing yet; a Redis that
	// accepted the connection but does not answer still holds it up to
	// its read timeout), and also waits in sigs: a worker that connected
	// all the same stops at once.
	sigs := make(chan os.Signal, 2) // a second signal may come while the first is handled
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if f.id == "" {
		host, _ := os.Hostname() // "" is fine: the pid still names the process
		f.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	openCtx, stopOpen := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	q, err := queue.Open(openCtx, f.redis, queue.Options{Logger: logger})
	signalled := openCtx.Err() != nil && ctx.Err() == nil
	stopOpen()
	if err != nil {
		if signalled {
			fmt.Fprintln(stderr, "batchagent worker: stopped before it connected")
			return exitOK
		}
		fmt.Fprintln(stderr, "batchagent worker:", err)
		return exitFailed
	}
	defer q.Close()
	w := &worker{
		q: q, f: f, logger: logger.With("worker", f.id), stderr: stderr,
		runs: map[string]*workerRun{}, held: map[string]queue.Task{},
		freed: make(chan struct{}, 1),
	}

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	// agentCtx outlives the read loop: the agents finish their turns in
	// flight after it ends. A second signal cancels it.
	agentCtx, stopNow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNow()
	done := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // the signal handler; ends at done
		select {
		case <-sigs:
		case <-readCtx.Done():
		case <-done:
			return
		}
		stopReading()
		fmt.Fprintf(stderr, "batchagent worker %s: stopping: finishing the turns in flight (up to %s; interrupt again to stop at once), then releasing the tasks held\n", f.id, f.grace)
		select {
		case <-sigs:
			fmt.Fprintf(stderr, "batchagent worker %s: stopping at once\n", f.id)
			stopNow()
		case <-done:
		}
	})
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	bg.Go(func() { w.heartbeat(beatCtx) })

	fmt.Fprintf(stderr, "batchagent worker %s: serving %s (max %d agents, visibility %s)\n", f.id, queue.RedactURL(f.redis), f.maxActive, f.visibility)
	w.loop(readCtx, agentCtx)

	// Drain: the engines stop admitting turns and wait for those in
	// flight; the agents they stop end canceled and are released.
	graceCtx, cancelGrace := context.WithTimeout(agentCtx, f.grace)
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
		if r.slots != nil {
			r.slots.close()
		}
		if r.tools != nil {
			if err := r.tools.close(); err != nil {
				w.logger.Warn("closing tools", "err", err)
			}
		}
	}
	stopBeats()
	close(done)
	bg.Wait()
	left := w.releaseHeld()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisOpTimeout)
	defer cancel()
	if err := q.Leave(lctx, f.id); err != nil {
		fmt.Fprintf(stderr, "batchagent worker %s: leave: %v\n", f.id, err)
	}
	fmt.Fprintf(stderr, "batchagent worker %s: stopped: %d results recorded, %d unfinished tasks released", f.id, w.recorded.Load(), w.released.Load())
	if left > 0 {
		fmt.Fprintf(stderr, "; %d tasks could not be released: others take them after the visibility timeout (%s)", left, f.visibility)
	}
	fmt.Fprintln(stderr)
	return exitOK
}

// loop reads tasks while it has room, and reclaims the tasks of workers
// that went silent, until ctx ends. Agents run under agentCtx.
func (w *worker) loop(ctx, agentCtx context.Context) {
	reclaimEvery := max(w.f.visibility/3, time.Second)
	var lastReclaim time.Time
	for ctx.Err() == nil {
		free := w.f.maxActive - w.heldCount()
		if free <= 0 {
			select {
			case <-w.freed:
			case <-ctx.Done():
			}
			continue
		}
		var tasks []queue.Task
		if time.Since(lastReclaim) >= reclaimEvery {
			lastReclaim = time.Now()
			got, err := w.q.Reclaim(ctx, w.id(), w.f.visibility, free)
			if err != nil && ctx.Err() == nil {
				w.logger.Warn("reclaim", "err", err)
			}
			tasks = got
		}
		if len(tasks) < free {
			got, err := w.q.Read(ctx, w.id(), free-len(tasks), time.Second)
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

// closeIdle shuts down the engines, and closes the tools, of the runs with
// no task held here that started none for runIdle.
func (w *worker) closeIdle(ctx context.Context) {
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
		r.slots.close()
		if err := r.tools.close(); err != nil {
			w.logger.Warn("closing tools", "job", id, "err", err)
		}
		w.logger.Info("run closed: idle", "job", id)
	}
}

// id is the worker's name.
func (w *worker) id() string { return w.f.id }

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
func (w *worker) start(ctx context.Context, t queue.Task) {
	if bytes.Equal(bytes.TrimSpace(t.Input), []byte("null")) {
		w.ack(t)
		return
	}
	r, err := w.run(ctx, t.Run)
	if errors.Is(err, queue.ErrNoRun) {
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
	h := r.engine.Agent(ctx, r.spec, t.Index, in)
	w.agents.Go(func() {
		res, _ := h.Wait(context.WithoutCancel(ctx)) // the engine ends every Handle
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

// run returns the worker's engine and Spec of run id, opening its job on
// first use: the job file's bytes as the coordinator read them, parsed
// with relative paths resolved against the coordinator's job directory,
// and its backend and tools opened as `batchagent run` opens them. The
// error wraps queue.ErrNoRun when the run is gone.
func (w *worker) run(ctx context.Context, id string) (*workerRun, error) {
	if r, ok := w.runs[id]; ok && (r.err == nil || time.Now().Before(r.retry)) {
		return r, r.err
	}
	r, err := w.openRun(ctx, id)
	if errors.Is(err, queue.ErrNoRun) {
		return nil, err
	}
	if err != nil {
		w.logger.Error("cannot open the run's job: its tasks are left for other workers (retried here after the visibility timeout)", "job", id, "err", err)
		r = &workerRun{err: err, retry: time.Now().Add(w.f.visibility)}
	}
	w.runs[id] = r
	return r, err
}

// openRun opens run id's job; see run.
func (w *worker) openRun(ctx context.Context, id string) (*workerRun, error) {
	st, err := w.q.RunStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	cj, err := config.Parse(st.Job, st.JobPath, filepath.Dir(st.JobPath))
	if err != nil {
		return nil, err
	}
	// The run's cacheable tool results are shared by its workers: under
	// the run's ID, since the same tool call may read other files in
	// another run's job directory.
	rn := &runner{name: id, sharedTools: queue.NewToolCache(w.q.Redis(), w.q.Key("tool", id)+":")}
	_, model, err := rn.openModel(ctx, cj, "")
	if err != nil {
		return nil, err
	}
	if rn.tools, err = buildTools(ctx, cj); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = rn.tools.close() // the setup error is the one to report
		}
	}()
	cfg, err := engineConfig(cj, model, w.logger)
	if err != nil {
		return nil, err
	}
	cfg.MaxActive = w.f.maxActive
	cfg.Checkpoint = w.q.Checkpointer()
	slots := &runSlots{}
	w.shareLimits(&cfg, cj, model, slots)
	spec, err := rn.buildSpec(ctx, st.JobPath, cj, model)
	if err != nil {
		return nil, err
	}
	e, err := batchagent.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st.JobPath, err)
	}
	ok = true
	w.logger.Info("run opened", "job", id, "path", st.JobPath)
	return &workerRun{spec: spec, engine: e, tools: rn.tools, slots: slots}, nil
}

// finish records the result of task t and acknowledges it, or, for an
// agent stopped by the worker's shutdown (or failed by Redis: see
// releasable), releases it so that another worker continues it from its last
// checkpointed turn. A task whose result could not be recorded stays
// pending: it is reclaimed after the visibility timeout.
func (w *worker) finish(t queue.Task, res batchagent.Result) {
	defer w.unhold(t)
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	defer cancel()
	if releasable(res.Err) {
		if err := w.q.Release(ctx, w.id(), t); err != nil {
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
	case errors.Is(err, queue.ErrNoRun):
	case err != nil:
		w.logger.Error("record result: the task is taken again after the visibility timeout", "job", t.Run, "agent", t.Index, "err", err)
		return
	case first:
		w.recorded.Add(1)
	}
	w.ackCtx(ctx, t)
}

// ack acknowledges t with a bounded wait.
func (w *worker) ack(t queue.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	defer cancel()
	w.ackCtx(ctx, t)
}

func (w *worker) ackCtx(ctx context.Context, t queue.Task) {
	if err := w.q.Ack(ctx, t); err != nil {
		w.logger.Warn("ack task: its result is recorded; a worker that takes it again records nothing new", "job", t.Run, "agent", t.Index, "err", err)
	}
}

// hold adds t to the tasks held, and reports false when it was held
// already.
func (w *worker) hold(t queue.Task) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.held[t.ID]; ok {
		return false
	}
	w.held[t.ID] = t
	return true
}

func (w *worker) unhold(t queue.Task) {
	w.mu.Lock()
	delete(w.held, t.ID)
	w.mu.Unlock()
	select {
	case w.freed <- struct{}{}:
	default: // a signal is pending already
	}
}

func (w *worker) heldCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

// heldIDs returns the entry IDs of the tasks held.
func (w *worker) heldIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.held))
	for id := range w.held {
		ids = append(ids, id)
	}
	return ids
}

// releaseHeld releases what is still held once the agents have ended
// (nothing, unless a result could not be handled), and returns how many
// tasks it could not release.
func (w *worker) releaseHeld() int {
	w.mu.Lock()
	tasks := make([]queue.Task, 0, len(w.held))
	for _, t := range w.held {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	left := 0
	for _, t := range tasks {
		ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
		if err := w.q.Release(ctx, w.id(), t); err != nil {
			left++
		} else {
			w.released.Add(1)
		}
		cancel()
	}
	return left
}

// heartbeat beats every few seconds with the number of agents held, and
// touches the tasks held every third of the visibility timeout so that
// no other worker reclaims a live agent, until ctx ends.
func (w *worker) heartbeat(ctx context.Context) {
	beatEvery := min(2*time.Second, w.f.visibility/3)
	touchEvery := w.f.visibility / 3
	ttl := 3*beatEvery + time.Second
	tick := time.NewTicker(beatEvery)
	defer tick.Stop()
	var lastTouch time.Time
	for {
		bctx, cancel := context.WithTimeout(ctx, redisOpTimeout)
		if err := w.q.Beat(bctx, w.id(), w.heldCount(), ttl); err != nil && ctx.Err() == nil {
			w.logger.Warn("heartbeat", "err", err)
		}
		if time.Since(lastTouch) >= touchEvery {
			lastTouch = time.Now()
			if ids := w.heldIDs(); len(ids) > 0 {
				if err := w.q.Touch(bctx, w.id(), ids); err != nil && ctx.Err() == nil {
					w.logger.Warn("touch tasks", "err", err)
				}
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// shareLimits makes the job's limits (cj's) one limit in Redis for every
// worker that calls the same backend address and model, rather than one
// per worker: rpm and tpm one budget (queue.SharedRate), so that the
// account's limit stays one limit however many workers run, and
// max_inflight, when the job sets it, one adaptive limit on the calls in
// flight (queue.SharedSlots), so that a server sized for N sequences gets
// at most N. Only the job's own backend, model, shares: fallback tiers
// keep per-process limits. The shared slot limits made are added to
// slots.
func (w *worker) shareLimits(cfg *batchagent.Config, cj *config.Job, model llm.Model, slots *runSlots) {
	addr := backendAddr(cj.Backend)
	if adm := cfg.Admission; adm.MaxInflight > 0 {
		cfg.Admission.SharedInflight = func(b batchagent.Backend) (sched.SharedSlots, error) {
			if b.Model != model {
				return nil, nil
			}
			// A dead worker's slots come back no later than its tasks:
			// within the visibility timeout.
			sl, err := queue.NewSharedSlots(w.q.Redis(), w.q.Key("slots", addr, b.Name), queue.SharedSlotsConfig{
				Max: adm.MaxInflight, LeaseTTL: min(queue.DefaultLeaseTTL, w.f.visibility), Logger: w.logger})
			if err != nil {
				return nil, err // not a nil *SharedSlots in a non-nil interface
			}
			slots.add(sl)
			return sl, nil
		}
	}
	rl := cfg.Admission.RateLimit
	if rl.RPM <= 0 && rl.TPM <= 0 {
		return
	}
	cfg.Admission.RateLimit.Shared = func(b batchagent.Backend) (sched.Shared, error) {
		if b.Model != model {
			return nil, nil
		}
		key := w.q.Key("rate", addr, b.Name)
		sr, err := queue.NewSharedRate(w.q.Redis(), key, queue.SharedRateConfig{RPM: rl.RPM, TPM: rl.TPM, Logger: w.logger})
		if err != nil {
			return nil, err
		}
		return sr, nil
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
	if batchagent.KindOf(err) == batchagent.KindCanceled || errors.Is(err, batchagent.ErrCheckpoint) || errors.Is(err, queue.ErrSharedLimit) {
		return true
	}
	ae, ok := errors.AsType[*batchagent.AgentError](err)
	return ok && ae.Op == "checkpoint"
}
