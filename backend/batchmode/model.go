package batchmode

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/respcache"
)

// Defaults of [Config].
const (
	DefaultLinger    = 2 * time.Second
	DefaultPollEvery = 10 * time.Second
	// DefaultConcurrency is what a batch Model declares: calls wait in
	// submissions, not on the provider's servers, so as many may be in
	// flight as a submission holds.
	DefaultConcurrency = 50_000
)

// Config configures a [Model].
type Config struct {
	// Journal is the file (SQLite) where the Model records its
	// submissions, their lines and the answers read back, before and after
	// each step, so that a process killed at any point resumes from it:
	// it polls the batches already submitted and answers their calls from
	// them, never submitting a call twice. "" keeps the journal in memory:
	// a killed process forgets its batches (they still run, and bill).
	Journal string
	// Linger is how long a call waits for others before a submission goes
	// out with what waits. Defaults to DefaultLinger.
	Linger time.Duration
	// MinLines sends a submission as soon as this many calls wait.
	// Defaults to the provider's Limits.MaxLines (or 10,000 without one).
	MinLines int
	// PollEvery is how often each running batch is polled. Defaults to
	// DefaultPollEvery.
	PollEvery time.Duration
	// MaxEnqueuedTokens caps the prompt tokens of the batches running at
	// once (OpenAI's enqueued-token limit per model); zero means none.
	// A call larger than the cap goes out alone.
	MaxEnqueuedTokens int64
	// CountTokens estimates a request's prompt tokens, for
	// MaxEnqueuedTokens. Defaults to a quarter of the line's bytes.
	CountTokens func(*llm.Request) int
	// Capabilities is what the Model declares: the real-time client's
	// (native tools, schema, media), with Streaming off and
	// DefaultConcurrency raised to DefaultConcurrency when lower.
	Capabilities llm.Capabilities
	// Logger receives what the Model does (submissions, their ends,
	// requeued lines) and warnings. Defaults to discarding.
	Logger *slog.Logger
}

// Stats counts a Model's work since it opened.
type Stats struct {
	// Submissions counts the batches created; Lines the lines they held.
	Submissions, Lines int
	// Resumed counts the batches of an earlier process taken over from
	// the journal.
	Resumed int
	// Requeued counts lines asked again because their batch ended without
	// answering them (expired, cancelled, refused for the enqueued-token
	// limit).
	Requeued int
	// Journaled counts calls answered from the journal: answered by a
	// batch before, to a process that did not live to return them.
	Journaled int
	// Failed counts lines whose result was an error.
	Failed int
}

// ErrClosed is returned by the calls waiting when the Model closes.
var ErrClosed = errors.New("batchmode: model closed")

// A Model is an llm.Model whose calls go through a provider's batch API.
// Generate returns when the batch holding the call has ended and its
// result has been read: minutes to hours. It is safe for concurrent use;
// Close stops it.
type Model struct {
	p      Provider
	cfg    Config
	lim    Limits
	j      *journal
	log    *slog.Logger
	ctx    context.Context // the Model's own work: submitting, polling
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // a call is waiting

	mu       sync.Mutex
	waiting  []*call          // not yet submitted, oldest first
	byKey    map[string]*call // waiting or in a running batch, by request key
	attempts map[string]int   // the next attempt of each key
	enqueued int64            // prompt tokens of running batches
	stats    Stats
	closed   bool
	once     sync.Once
	startErr error // the journal could not be read: every call fails with it
}

// call is one request on its way through a batch.
type call struct {
	key    string
	req    *llm.Request // nil for a call resumed from the journal until a waiter joins
	id     string       // custom_id of its current line
	line   []byte
	tokens int64
	since  time.Time // when it started waiting for a submission

	waiters int // Generate calls waiting for it
	done    chan struct{}
	resp    *llm.Response
	err     error
}

// New returns a Model sending calls through p, and takes over the
// batches its journal holds unended (see Config.Journal).
func New(p Provider, cfg Config) (*Model, error) {
	lim := p.Limits()
	cfg.Linger = cmp.Or(cfg.Linger, DefaultLinger)
	cfg.PollEvery = cmp.Or(cfg.PollEvery, DefaultPollEvery)
	cfg.MinLines = cmp.Or(cfg.MinLines, lim.MaxLines, 10_000)
	if lim.MaxLines > 0 && cfg.MinLines > lim.MaxLines {
		cfg.MinLines = lim.MaxLines
	}
	if cfg.Linger < 0 || cfg.PollEvery < 0 || cfg.MinLines < 0 || cfg.MaxEnqueuedTokens < 0 {
		return nil, errors.New("batchmode: negative Linger, PollEvery, MinLines or MaxEnqueuedTokens")
	}
	cfg.Capabilities.Streaming = false
	cfg.Capabilities.QueueProbe = false
	cfg.Capabilities.DefaultConcurrency = max(cfg.Capabilities.DefaultConcurrency, DefaultConcurrency)
	j, err := openJournal(cfg.Journal)
	if err != nil {
		return nil, err
	}
	m := &Model{
		p: p, cfg: cfg, lim: lim, j: j,
		log:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		kick:  make(chan struct{}, 1),
		byKey: map[string]*call{}, attempts: map[string]int{},
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// start takes over the batches the journal holds unended and starts
// sending submissions; Generate calls it once, so that a Model opened and
// closed without a call (a run refused for a lock another run holds)
// never touches the batches of the process that holds it.
func (m *Model) start() {
	subs, attempts, err := m.j.unended(m.ctx)
	m.mu.Lock()
	if err != nil {
		m.startErr = fmt.Errorf("batchmode: journal %s: %w", m.cfg.Journal, err)
		m.mu.Unlock()
		return
	}
	m.attempts = attempts
	m.mu.Unlock()
	for _, s := range subs {
		m.resume(s)
	}
	m.wg.Add(1)
	go m.flush()
}

// Capabilities reports Config.Capabilities.
func (m *Model) Capabilities() llm.Capabilities { return m.cfg.Capabilities }

// Stats returns the Model's counts.
func (m *Model) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Close stops the Model: the calls waiting fail with ErrClosed, and the
// batches running go on at the provider, recorded in the journal for the
// next Model on it to take over.
func (m *Model) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	for _, c := range m.byKey {
		m.finish(c, nil, ErrClosed)
	}
	m.waiting = nil
	m.mu.Unlock()
	return m.j.close()
}

// Generate sends req in the next submission and returns its answer once
// the batch has ended. A request answered by a batch before, to this
// process or one the journal outlived, is answered from the journal; a
// request already waiting or in a running batch joins it.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	key, err := respcache.Key(req)
	if err != nil {
		return nil, err
	}
	m.once.Do(m.start)
	if r, err := m.j.answer(ctx, key); err != nil {
		m.log.Warn("batchmode: journal read failed; asking the batch API", "err", err)
	} else if r != nil {
		m.mu.Lock()
		m.stats.Journaled++
		m.mu.Unlock()
		return r, nil
	}
	m.mu.Lock()
	if m.closed || m.startErr != nil {
		m.mu.Unlock()
		return nil, cmp.Or(m.startErr, ErrClosed)
	}
	c := m.byKey[key]
	if c == nil {
		c = &call{key: key, req: req, done: make(chan struct{})}
		if err := m.encode(c); err != nil {
			m.mu.Unlock()
			return nil, err
		}
		m.byKey[key] = c
		m.queue(c)
	} else if c.req == nil {
		c.req = req // resumed from the journal: now it can be asked again if need be
	}
	c.waiters++
	m.mu.Unlock()

	select {
	case <-c.done:
		if c.err != nil {
			return nil, c.err
		}
		r := *c.resp // each waiter its own, as each asked its own
		r.Message.ToolCalls = slices.Clone(r.Message.ToolCalls)
		r.Message.Parts = slices.Clone(r.Message.Parts)
		return &r, nil
	case <-ctx.Done():
		m.mu.Lock()
		c.waiters--
		if c.waiters == 0 && c.id != "" && m.unqueue(c) {
			// Not submitted yet and nobody else waits: never ask it.
			delete(m.byKey, c.key)
		}
		m.mu.Unlock()
		return nil, ctx.Err()
	}
}

// encode gives c its next line: a new custom_id (the key's next attempt)
// and the provider's encoding. m.mu is held.
func (m *Model) encode(c *call) error {
	n := m.attempts[c.key]
	id := fmt.Sprintf("%s-%d", c.key[:32], n)
	line, err := m.p.Encode(id, c.req)
	if err != nil {
		return err
	}
	if m.lim.MaxBytes > 0 && int64(len(line)) > m.lim.MaxBytes {
		return &llm.APIError{Err: llm.ErrBadRequest, Message: fmt.Sprintf("batchmode: the request takes %d bytes, more than a batch may hold (%d)", len(line), m.lim.MaxBytes)}
	}
	m.attempts[c.key] = n + 1
	c.id, c.line = id, line
	if m.cfg.CountTokens != nil {
		c.tokens = int64(m.cfg.CountTokens(c.req))
	} else {
		c.tokens = int64(len(line) / 4)
	}
	return nil
}

// queue puts c at the end of the calls waiting for a submission. m.mu is
// held.
func (m *Model) queue(c *call) {
	c.since = time.Now()
	m.waiting = append(m.waiting, c)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// unqueue takes c out of the calls waiting, if it is there. m.mu is held.
func (m *Model) unqueue(c *call) bool {
	for i, w := range m.waiting {
		if w == c {
			m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// finish ends c with its answer or error, for every waiter, and forgets
// it. m.mu is held.
func (m *Model) finish(c *call, r *llm.Response, err error) {
	select {
	case <-c.done:
		return
	default:
	}
	c.resp, c.err = r, err
	close(c.done)
	if m.byKey[c.key] == c {
		delete(m.byKey, c.key)
	}
}

// flush sends submissions: when MinLines calls wait, or when the oldest
// waiting call has waited Linger, within the provider's limits and the
// enqueued-token cap. Each submission is made and then polled on its own
// goroutine, so that submissions are pipelined.
func (m *Model) flush() {
	defer m.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		m.mu.Lock()
		var wait time.Duration
		ready := false
		if len(m.waiting) > 0 {
			wait = time.Until(m.waiting[0].since.Add(m.cfg.Linger))
			ready = len(m.waiting) >= m.cfg.MinLines || wait <= 0
		}
		var batch []*call
		if ready {
			batch = m.take()
		}
		empty := len(m.waiting) == 0
		m.mu.Unlock()
		if len(batch) > 0 {
			m.wg.Add(1)
			go m.submit(batch)
			continue
		}
		timer.Reset(time.Hour)
		if !empty && wait > 0 {
			timer.Reset(wait)
		} else if !empty {
			timer.Reset(m.cfg.PollEvery) // held back by the token cap: look again
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.kick:
		case <-timer.C:
		}
	}
}

// take takes the calls of the next submission off the waiting ones:
// oldest first, up to the line and byte limits and the token cap. m.mu is
// held.
func (m *Model) take() []*call {
	var (
		n      int
		bytes  int64
		tokens int64
	)
	for _, c := range m.waiting {
		if m.lim.MaxLines > 0 && n == m.lim.MaxLines {
			break
		}
		if m.lim.MaxBytes > 0 && bytes+int64(len(c.line))+1 > m.lim.MaxBytes {
			break
		}
		if most := m.cfg.MaxEnqueuedTokens; most > 0 && m.enqueued+tokens+c.tokens > most && (n > 0 || m.enqueued > 0) {
			break
		}
		n++
		bytes += int64(len(c.line)) + 1
		tokens += c.tokens
	}
	batch := m.waiting[:n:n]
	m.waiting = m.waiting[n:]
	m.enqueued += tokens
	return batch
}

// newTag returns a unique name for a submission.
func newTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ba-" + hex.EncodeToString(b[:])
}

// sub is a submission on its way: made, then polled until it ends.
type sub struct {
	tag     string
	fileID  string
	batchID string
	started time.Time
	calls   map[string]*call // by custom_id
	lines   [][]byte
	tokens  int64
	resumed bool // taken over from the journal
}

// submit makes a submission of batch and polls it to its end.
func (m *Model) submit(batch []*call) {
	defer m.wg.Done()
	s := &sub{tag: newTag(), started: time.Now(), calls: make(map[string]*call, len(batch))}
	recs := make([]record, len(batch))
	for i, c := range batch {
		s.calls[c.id] = c
		s.lines = append(s.lines, c.line)
		s.tokens += c.tokens
		recs[i] = record{id: c.id, key: c.key, attempt: m.attemptOf(c.id), tokens: c.tokens}
	}
	// The journal records each step even while the Model closes: a
	// created batch bills, and the next process must find its id there.
	jctx := context.WithoutCancel(m.ctx)
	if err := m.j.begin(jctx, s.tag, s.started, recs); err != nil {
		m.fail(s, fmt.Errorf("batchmode: journal: %w", err))
		return
	}
	fileID, err := retry(m.ctx, func() (string, error) { return m.p.Upload(m.ctx, s.tag+".jsonl", s.lines) })
	if err != nil {
		m.abandon(s, err)
		return
	}
	s.fileID = fileID
	s.started = time.Now()
	if err := m.j.set(jctx, s.tag, stateCreating, fileID, "", s.started); err != nil {
		m.fail(s, fmt.Errorf("batchmode: journal: %w", err))
		return
	}
	batchID, err := m.create(s)
	if err != nil {
		m.abandon(s, err)
		return
	}
	s.batchID = batchID
	if err := m.j.set(jctx, s.tag, stateRunning, "", batchID, time.Time{}); err != nil {
		m.fail(s, fmt.Errorf("batchmode: journal: %w", err))
		return
	}
	m.mu.Lock()
	m.stats.Submissions++
	m.stats.Lines += len(batch)
	m.mu.Unlock()
	m.log.Info("batchmode: submitted", "batch", batchID, "lines", len(batch))
	m.poll(s)
}

// attemptOf returns the attempt number of custom_id id.
func (m *Model) attemptOf(id string) int {
	var n int
	_, _ = fmt.Sscanf(id[33:], "%d", &n)
	return n
}

// create creates s's batch. A failed Create is tried again only after Find
// says the batch does not exist: the failure may have been the answer's,
// not the request's. It is tried until it succeeds or is refused for
// good, however long the provider is unreachable (or the Model closes,
// leaving the submission in the journal for the next process to find):
// giving up could leave a batch running, and billing, whose calls would
// be asked again.
func (m *Model) create(s *sub) (string, error) {
	pause := time.Second
	for {
		id, err := m.p.Create(m.ctx, s.fileID, s.lines, s.tag)
		if err == nil {
			return id, nil
		}
		if !llm.IsTransient(err) && !errors.Is(err, llm.ErrConnection) {
			return "", err
		}
		if found, ferr := m.p.Find(m.ctx, s.fileID, s.tag, len(s.lines), s.started); ferr == nil && found != "" {
			return found, nil
		}
		m.log.Warn("batchmode: creating a batch failed; trying again", "err", err, "pause", pause)
		select {
		case <-m.ctx.Done():
			return "", m.ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Minute)
	}
}

// uploadTries is how many times an upload refused for the moment (429,
// 5xx) is tried before its calls fail with the refusal, for the engine's
// retries and outage handling to take over. Nothing is billed for an
// upload, so giving up is safe; a Create is tried until it is known to
// have happened or not (see create).
const uploadTries = 5

// retry calls f until it succeeds, fails for good, has been refused
// uploadTries times, or the Model closes. A connection failure is not
// tried again: the engine tells a backend that is down or mistyped from
// one that flickers.
func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	pause := time.Second
	for try := 1; ; try++ {
		v, err := f()
		if err == nil || !llm.IsTransient(err) || errors.Is(err, llm.ErrConnection) || try == uploadTries {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Minute)
	}
}

// abandon ends a submission that never became a batch: its calls fail
// with err (or stay for the next process, when the Model is closing), and
// the journal forgets it.
func (m *Model) abandon(s *sub, err error) {
	if m.ctx.Err() != nil {
		m.release(s)
		return // closing: the journal keeps it for the next process
	}
	if s.fileID != "" {
		_ = m.p.Delete(m.ctx, s.fileID)
	}
	if jerr := m.j.drop(m.ctx, s.tag); jerr != nil {
		m.log.Warn("batchmode: journal", "err", jerr)
	}
	m.fail(s, err)
}

// fail ends every call of s with err.
func (m *Model) fail(s *sub, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.enqueued -= s.tokens
	for _, c := range s.calls {
		m.finish(c, nil, err)
	}
}

// release gives back s's enqueued tokens.
func (m *Model) release(s *sub) {
	m.mu.Lock()
	m.enqueued -= s.tokens
	m.mu.Unlock()
}

// poll polls s's batch until it ends, then reads its results.
func (m *Model) poll(s *sub) {
	t := time.NewTicker(m.cfg.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			m.release(s)
			return
		case <-t.C:
		}
		st, err := m.p.Poll(m.ctx, s.batchID)
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Warn("batchmode: polling a batch failed", "batch", s.batchID, "err", err)
			}
			continue // transient or not, the batch is still there: poll again
		}
		switch st.State {
		case Running:
			continue
		case Failed:
			m.failed(s, st)
			return
		case Ended:
			if s.resumed {
				if !m.rejoined(s) && time.Since(s.started) < ResumeGrace {
					continue // let the resumed agents ask their calls again first
				}
				m.reencode(s)
			}
			if err := m.collect(s, st); err != nil {
				if m.ctx.Err() != nil {
					m.release(s)
					return
				}
				m.log.Warn("batchmode: reading a batch's results failed; trying again", "batch", s.batchID, "err", err)
				continue
			}
			return
		}
	}
}

// ResumeGrace is how long the Model waits, once a batch taken over from
// the journal has ended, for the calls of its lines to be asked again
// (the resumed agents ask them as they start) before it reads its
// results: a provider decodes an answer best knowing its request (the
// name of a structured-output tool, say), which a line's result does not
// repeat.
const ResumeGrace = 30 * time.Second

// rejoined reports whether every call of the resumed s has been asked
// again.
func (m *Model) rejoined(s *sub) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range s.calls {
		if c.req == nil {
			return false
		}
	}
	return true
}

// reencode gives the provider the request of each call of the resumed s
// that has been asked again: the same id and request make the same line,
// so nothing is sent; the provider learns again how to read its answer.
func (m *Model) reencode(s *sub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range s.calls {
		if c.req != nil {
			_, _ = m.p.Encode(c.id, c.req)
		}
	}
}

// failed ends a batch refused as a whole: refused for the moment, its
// lines wait for the next submission; refused for its content, its calls
// fail with the provider's reason.
func (m *Model) failed(s *sub, st Status) {
	if err := m.j.answered(m.ctx, s.tag, nil); err != nil {
		m.log.Warn("batchmode: journal", "err", err)
	}
	_ = m.p.Delete(m.ctx, s.fileID, st.OutputFile, st.ErrorFile)
	if st.Retry {
		m.log.Warn("batchmode: batch refused for now; its lines go in a later submission", "batch", s.batchID, "reason", st.Reason)
		m.requeue(s, s.calls)
		return
	}
	m.fail(s, &llm.APIError{Err: llm.ErrBadRequest, Message: "batch " + s.batchID + " failed: " + st.Reason})
}

// collect reads an ended batch's results, stores the answers in the
// journal, and ends each call: answered, failed, or asked again.
func (m *Model) collect(s *sub, st Status) error {
	answers := map[string]*llm.Response{}
	errs := map[string]error{}
	err := m.p.Results(m.ctx, s.batchID, st, func(r Result) error {
		c := s.calls[r.ID]
		if c == nil {
			return nil // a line of no call of ours
		}
		if r.Err != nil {
			errs[r.ID] = r.Err
			return nil
		}
		if r.Resp == nil {
			errs[r.ID] = &llm.APIError{Err: llm.ErrServer, Message: "batchmode: result line " + r.ID + " holds neither an answer nor an error"}
			return nil
		}
		answers[c.key] = r.Resp
		delete(errs, r.ID)
		return nil
	})
	if err != nil {
		return err
	}
	if err := m.j.answered(m.ctx, s.tag, answers); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	_ = m.p.Delete(m.ctx, s.fileID, st.OutputFile, st.ErrorFile)
	again := map[string]*call{}
	m.mu.Lock()
	m.enqueued -= s.tokens
	for id, c := range s.calls {
		if r := answers[c.key]; r != nil {
			m.finish(c, r, nil)
			continue
		}
		if err := errs[id]; err != nil && !errors.Is(err, ErrUnanswered) {
			m.stats.Failed++
			m.finish(c, nil, err)
			continue
		}
		again[id] = c // unanswered: expired, cancelled, or left out
	}
	m.mu.Unlock()
	if len(again) > 0 {
		m.log.Info("batchmode: batch ended without answering some lines; asking them again", "batch", s.batchID, "lines", len(again), "expired", st.Expired, "cancelled", st.Cancelled)
		m.requeue(nil, again)
	}
	return nil
}

// requeue puts calls back in the waiting ones with a new line each;
// calls nobody waits for are dropped (their agents, resumed, ask again).
// s, when set, gives back its enqueued tokens.
func (m *Model) requeue(s *sub, calls map[string]*call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s != nil {
		m.enqueued -= s.tokens
	}
	for _, c := range calls {
		if c.waiters == 0 || c.req == nil || m.closed {
			if m.byKey[c.key] == c {
				delete(m.byKey, c.key)
			}
			continue
		}
		if err := m.encode(c); err != nil {
			m.finish(c, nil, err)
			continue
		}
		m.stats.Requeued++
		m.queue(c)
	}
}

// resume takes over a submission an earlier process left unended.
func (m *Model) resume(p *pending) {
	switch p.state {
	case stateUploading:
		// The upload may have happened, never the batch: forget it; the
		// agents ask their calls again.
		if err := m.j.drop(m.ctx, p.tag); err != nil {
			m.log.Warn("batchmode: journal", "err", err)
		}
		return
	case stateCreating:
		id, err := m.p.Find(m.ctx, p.fileID, p.tag, p.n, p.started)
		if err != nil {
			m.log.Warn("batchmode: finding a batch of an earlier run failed; its calls are asked again", "err", err)
		}
		if id == "" {
			_ = m.p.Delete(m.ctx, p.fileID)
			if err := m.j.drop(m.ctx, p.tag); err != nil {
				m.log.Warn("batchmode: journal", "err", err)
			}
			return
		}
		if err := m.j.set(m.ctx, p.tag, stateRunning, "", id, time.Time{}); err != nil {
			m.log.Warn("batchmode: journal", "err", err)
		}
		p.batchID = id
	}
	s := &sub{tag: p.tag, fileID: p.fileID, batchID: p.batchID, started: time.Now(), resumed: true, calls: make(map[string]*call, len(p.recs))}
	m.mu.Lock()
	for _, r := range p.recs {
		c := &call{key: r.key, id: r.id, tokens: r.tokens, done: make(chan struct{})}
		s.calls[r.id] = c
		s.tokens += r.tokens
		m.byKey[r.key] = c
	}
	m.enqueued += s.tokens
	m.stats.Resumed++
	m.mu.Unlock()
	m.log.Info("batchmode: resuming a batch of an earlier run", "batch", p.batchID, "lines", len(p.recs))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.poll(s)
	}()
}
