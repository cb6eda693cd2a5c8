package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/queue"
)

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

// runWorker is `batchagent worker`: it serves the queue at f.redis (a
// queue.Worker) until the first SIGINT or SIGTERM, then stops reading,
// lets the turns in flight finish (up to f.grace; a second signal stops at
// once), releases the tasks it still holds and leaves.
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
	w, err := queue.NewWorker(queue.WorkerConfig{
		Client: q, ID: f.id, MaxActive: f.maxActive, Visibility: f.visibility, Grace: f.grace,
		Open: jobOpener(q, f.visibility, logger.With("worker", f.id)), Logger: logger,
	})
	if err != nil {
		fmt.Fprintln(stderr, "batchagent worker:", err)
		return exitFailed
	}
	id := f.id

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
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
		fmt.Fprintf(stderr, "batchagent worker %s: stopping: finishing the turns in flight (up to %s; interrupt again to stop at once), then releasing the tasks held\n", id, f.grace)
		select {
		case <-sigs:
			fmt.Fprintf(stderr, "batchagent worker %s: stopping at once\n", id)
			w.StopNow()
		case <-done:
		}
	})
	fmt.Fprintf(stderr, "batchagent worker %s: serving %s (max %d agents, visibility %s)\n", id, queue.RedactURL(f.redis), f.maxActive, f.visibility)
	err = w.Run(readCtx)
	close(done)
	bg.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "batchagent worker %s: leave: %v\n", id, err)
	}
	st := w.Stats()
	fmt.Fprintf(stderr, "batchagent worker %s: stopped: %d results recorded, %d unfinished tasks released", id, st.Recorded, st.Released)
	if st.Unreleased > 0 {
		fmt.Fprintf(stderr, "; %d tasks could not be released: others take them after the visibility timeout (%s)", st.Unreleased, f.visibility)
	}
	fmt.Fprintln(stderr)
	return exitOK
}

// jobOpener returns the worker's Open: a run's job is the job file's bytes
// as the coordinator read them, parsed with relative paths resolved
// against the coordinator's job directory, and its backend and tools
// opened as `batchagent run` opens them, its limits shared in Redis (see
// queue.Client.ShareLimits), its response cache kept in Redis.
func jobOpener(q *queue.Client, visibility time.Duration, logger *slog.Logger) func(context.Context, queue.RunStatus) (queue.Job, error) {
	return func(ctx context.Context, st queue.RunStatus) (queue.Job, error) {
		cj, err := config.Parse(st.Job, st.JobPath, filepath.Dir(st.JobPath))
		if err != nil {
			return queue.Job{}, err
		}
		// The run's cacheable tool results are shared by its workers: under
		// the run's ID, since the same tool call may read other files in
		// another run's job directory.
		// Its model calls' answers are shared by every run's workers (a key
		// is a request's hash), unless the coordinator ran with --no-cache.
		j, err := jobrun.OpenJob(ctx, st.JobPath, cj, jobrun.JobOptions{
			Name: st.ID, SharedTools: queue.NewToolCache(q.Redis(), q.Key("tool", st.ID)+":"),
			NoCache: st.NoCache, SharedCache: queue.NewResponseStore(q.Redis(), q.Key("resp")+":"),
		})
		if err != nil {
			return queue.Job{}, err
		}
		cfg, err := j.EngineConfig(logger)
		if err != nil {
			_ = j.Close() // the setup error is the one to report
			return queue.Job{}, err
		}
		if j.Cap != nil { // the run's spend is kept in Redis for all its workers
			j.Cap.Share(sharedLedger{q.SpendLedger(st.ID)})
		}
		limits := q.ShareLimits(&cfg, queue.ShareConfig{Addr: j.Addr, Model: j.Model, Visibility: visibility, Logger: logger,
			Hosted: !strings.HasPrefix(j.Addr, "sim://"), Account: accountOf(cj)})
		return queue.Job{Config: cfg, Spec: j.Spec, Agent: j.AgentTally(), Close: func() error {
			limits.Close()
			return j.Close()
		}}, nil
	}
}

// accountOf names the account a job's backend bills, for sharing its
// learnt rate limits among the workers of that account only: a short hash
// of the API key the backend is opened with (the job's api_key_env, else
// the provider's usual variable), never the key; "" without a key.
func accountOf(cj *config.Job) string {
	env := cj.APIKeyEnv
	if env == "" {
		env = "OPENAI_API_KEY"
		if strings.HasPrefix(cj.Backend, "anthropic") {
			env = "ANTHROPIC_API_KEY"
		}
	}
	key := os.Getenv(env)
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("batchagent rate-limit account\x00" + key))
	return hex.EncodeToString(sum[:8])
}

// sharedLedger is a run's spend ledger in Redis as the spend cap's Ledger.
type sharedLedger struct{ l *queue.SpendLedger }

func (s sharedLedger) Reserve(ctx context.Context, limit, dollars float64) (spend.Verdict, float64, error) {
	v, spent, err := s.l.Reserve(ctx, limit, dollars)
	switch v {
	case queue.SpendReserved:
		return spend.Reserved, spent, err
	case queue.SpendWait:
		return spend.Wait, spent, err
	}
	return spend.Refused, spent, err
}

func (s sharedLedger) Settle(ctx context.Context, reserved, cost float64) error {
	return s.l.Settle(ctx, reserved, cost)
}
