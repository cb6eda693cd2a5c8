package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// Defaults of [Config].
const (
	DefaultMaxTurns     = job.DefaultMaxTurns
	DefaultMaxRetries   = job.DefaultMaxRetries
	DefaultOutageBudget = job.DefaultOutageBudget
)

// maxOutageAttempt caps the exponent of the back-off between retries
// during an outage: with the default base of 50ms an agent tries again at
// least every 1.6s (the gate's global pause spaces calls further), so it
// notices quickly that the backend is back.
const maxOutageAttempt = 5

// ErrMaxTurns is returned when an agent used all its turns without a final
// answer.
var ErrMaxTurns = job.ErrMaxTurns

// ErrStopped is returned when Config.Stop asked the agent to stop between
// turns (a graceful shutdown): its state holds its last completed turn.
var ErrStopped = job.ErrStopped

// StopFunc reports whether agents should stop before their next turn.
type StopFunc func() bool

// Gate admits model calls: it bounds how many run at once and may pace or
// pause them (rate limits, a backend's queue). batchagent's engine
// implements it over a sched.Scheduler.
type Gate interface {
	// Acquire blocks until req may be sent or ctx is done; higher priority
	// is served first. On success the caller holds a Permit.
	Acquire(ctx context.Context, priority int, req *llm.Request) (Permit, error)
}

// Permit is one admitted model call.
type Permit interface {
	// Release ends the call with its outcome: the response, or the error.
	Release(resp *llm.Response, err error)
}

// An AnswerGate is a Gate that knows when the backend last answered one
// of the calls it admitted: the call succeeded, or began to get its answer
// (AnswerPermit). Agents discover it with a type assertion. An agent's
// outage budget then measures time in which the backend could not answer:
// the agent's outage clock starts again at a failure that comes after such
// an answer, so that the time an agent waited for a slot behind calls
// being answered does not spend its budget.
type AnswerGate interface {
	Gate
	// LastAnswer returns when a call last succeeded or began to get its
	// answer; zero if none has.
	LastAnswer() time.Time
}

// An AnswerPermit is a Permit told when the backend began to answer its
// call: the first event of a streamed call, before Release. Agents
// discover it with a type assertion.
type AnswerPermit interface {
	Permit
	// Answering is called once, when the first event came.
	Answering()
}

// OnTurnFunc is called after every completed turn with the agent's state,
// e.g. to checkpoint it. It runs on the agent's goroutine; the state must
// not be retained after it returns (use [State.Clone]).
type OnTurnFunc func(ctx context.Context, st *State)

// Config is what the agents of one job share. The zero value is not useful:
// Model is required.
type Config struct {
	// Model answers the agents. Required.
	Model llm.Model
	// ModelName is passed to the backend; empty means its default.
	ModelName string
	// System is the system prompt. Output instructions are appended to it
	// when Schema is set, so the whole shared prefix is one message.
	System string
	// Tools executes tool calls. Nil means the agents have no tools.
	Tools *tool.Pool
	// Schema validates the final answer. Nil means any text is accepted
	// (the output is then the text as a JSON string). Broken JSON is
	// repaired first where the repair is unambiguous.
	Schema *schema.Schema
	// Check, if set, runs on each final answer after schema validation;
	// its error goes back to the model like a schema problem, and counts
	// against MaxRetries.
	Check schema.CheckFunc
	// MaxTurns caps model turns per agent, validation retries included.
	// Defaults to DefaultMaxTurns.
	MaxTurns int
	// MaxRetries caps the retries of one model call after transient
	// errors other than outages (server errors), and separately the
	// corrections requested for invalid output. Defaults to
	// DefaultMaxRetries; negative means no retries.
	MaxRetries int
	// OutageBudget bounds, in time rather than in retries, how long one
	// model call is retried while the backend cannot answer: rate limits,
	// overload, failed or broken connections and timeouts; and while the
	// Gate cannot admit it because a limit shared with other processes is
	// unreachable (job.ErrLimitUnavailable). The call fails
	// once such failures have lasted this long without an answer in
	// between (to this agent, or to any call an AnswerGate admitted);
	// each retry waits what the backend asked for (Retry-After), else a
	// jittered back-off. Defaults to DefaultOutageBudget; negative
	// means these failures are retried MaxRetries times like the others.
	OutageBudget time.Duration
	// MaxTokens caps each generation; zero means the backend's default.
	// An answer cut off at it (finish reason length) is asked again, with
	// a request for a shorter answer and the cap doubled up to
	// MaxTokensLimit; these retries count as corrections (MaxRetries). The
	// streamed answer is also cut by the client at llm.AnswerLimit(MaxTokens)
	// bytes, whatever the server does.
	MaxTokens int
	// MaxTokensLimit caps the raised token cap of a truncated answer's
	// retries. Defaults to 4×MaxTokens; set it to MaxTokens to retry with
	// the request for a shorter answer alone.
	MaxTokensLimit int
	// Temperature, TopP, Seed and StopSequences (llm.Request's Stop) go
	// into every request; nil and empty mean the backend's defaults.
	Temperature, TopP *float64
	Seed              *int64
	StopSequences     []string
	// ContextWindow is the model's context window in tokens. A request
	// whose estimated prompt plus MaxTokens comes near it has its older
	// tool results shortened, then its older turns dropped, first (see
	// State.Compactions). Zero means unknown: the window is then learnt
	// from the first refusal of a prompt's length (llm.ErrContextLength),
	// which is compacted and sent again instead of failing.
	ContextWindow int
	// Gate admits model calls. Nil means no bound.
	Gate Gate
	// Gauges, if set, counts the agents by what they are doing now (see
	// [Gauges]). Nil means they are not counted.
	Gauges *Gauges
	// Backoff spaces retries. The zero value uses retry's defaults.
	Backoff retry.Policy
	// OnTurn, if set, is called after every completed turn, except one
	// that ends the agent with an error (Run returns it with the state).
	OnTurn OnTurnFunc
	// Stop, if set, is consulted before each turn; when it returns true
	// the agent returns ErrStopped instead of starting the turn.
	Stop StopFunc
	// Stopped, if set, is closed once Stop returns true: an agent
	// waiting to retry a model call then stops at once with ErrStopped,
	// keeping its last completed turn. Nil means the wait runs its
	// course (Stop is consulted after it).
	Stopped <-chan struct{}
}

// Runner runs agents. It is safe for concurrent use, and immutable but for
// the context window its agents learn, which they share.
type Runner struct {
	learnt  atomic.Int64 // the smallest context window learnt; 0: none
	cfg     Config
	prefix  []llm.Message // the shared system message, or empty
	tools   []llm.ToolDef
	output  *llm.OutputSpec
	stream  llm.Streamer // cfg.Model as a Streamer, or nil
	answers AnswerGate   // cfg.Gate as an AnswerGate, or nil
	media   llm.Media    // the parts cfg.Model takes besides text: its Capabilities' Media, or none
}

// New returns a Runner. It returns an error if cfg.Model is nil or a limit
// is out of range.
func New(cfg Config) (*Runner, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent: no model")
	}
	if cfg.MaxTurns < 0 {
		return nil, fmt.Errorf("agent: negative max turns %d", cfg.MaxTurns)
	}
	if cfg.MaxTurns == 0 {
		cfg.MaxTurns = DefaultMaxTurns
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.MaxTokens < 0 || cfg.MaxTokensLimit < 0 {
		return nil, fmt.Errorf("agent: negative max tokens %d or max tokens limit %d", cfg.MaxTokens, cfg.MaxTokensLimit)
	}
	if cfg.ContextWindow < 0 {
		return nil, fmt.Errorf("agent: negative context window %d", cfg.ContextWindow)
	}
	if cfg.MaxTokensLimit == 0 {
		cfg.MaxTokensLimit = 4 * cfg.MaxTokens
	}
	cfg.MaxTokensLimit = max(cfg.MaxTokensLimit, cfg.MaxTokens)
	if cfg.OutageBudget == 0 {
		cfg.OutageBudget = DefaultOutageBudget
	}
	r := &Runner{cfg: cfg}
	r.stream, _ = cfg.Model.(llm.Streamer)
	r.answers, _ = cfg.Gate.(AnswerGate)
	if c, ok := cfg.Model.(llm.Capable); ok {
		r.media = c.Capabilities().Media
	}
	system := cfg.System
	if cfg.Schema != nil {
		r.output = &llm.OutputSpec{Name: "output", Schema: cfg.Schema.Raw()}
		if system != "" {
			system += "\n\n"
		}
		system += cfg.Schema.Instructions()
	}
	if system != "" {
		r.prefix = []llm.Message{{Role: llm.RoleSystem, Content: system}}
	}
	if cfg.Tools != nil {
		for _, s := range cfg.Tools.Specs() {
			params := s.Parameters
			if len(params) == 0 {
				params = json.RawMessage(`{"type":"object"}`)
			}
			r.tools = append(r.tools, llm.ToolDef{Name: s.Name, Description: s.Description, Parameters: params})
		}
	}
	return r, nil
}

// Error reports the step that ended an agent.
type Error struct {
	// Op is the failed step: "generate", "tool" or "validate".
	Op string
	// Turn is the 0-based turn that failed.
	Turn int
	// Err is the cause: an *llm.APIError, a context error, ErrMaxTurns, a
	// *schema.ValidationError or a tool error wrapping tool.ErrFatal.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("turn %d: %s: %v", e.Turn, e.Op, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Run runs the agent from st until it produces a valid final answer, fails
// or ctx ends. st must hold the conversation so far without the shared
// prefix: a fresh agent starts with one user message (its task); a resumed
// one with the messages of its last completed turn. Run updates st in place
// (messages, turns, counters, output, and a span per model turn appended to
// st.Spans) and returns nil on success, with st.Output set, or an *Error.
func (r *Runner) Run(ctx context.Context, st *State) error {
	if len(st.Messages) == 0 {
		return &Error{Op: "generate", Turn: st.Turns, Err: errors.New("agent: empty conversation")}
	}
	// Run's frame is on the agent's stack all through its run, under
	// every model call and tool wait: what a turn does with its answer is
	// in the functions it calls, so that the frame stays small and the
	// agent's goroutine keeps a 4 KB stack (BenchmarkAgentMemory in
	// package batchagent measures it).
	var (
		cut   *cuts  // the answers of this run cut off at the token cap; nil: none
		tools *early // the tool calls of a turn started mid-stream
	)
	for {
		if err := r.mayStart(st); err != nil {
			return err
		}
		tools = r.earlyTools(ctx, st.Turns, tools)
		resp, span, err := r.observedGenerate(ctx, st, tools)
		if err != nil {
			tools.discard()
			return &Error{Op: "generate", Turn: st.Turns, Err: err}
		}
		turn := st.Turns
		st.Turns++
		if r.cut(resp) {
			tools.discard() // the cut calls are not run
			if cut == nil {
				cut = new(cuts)
			}
			if err := r.retryCut(ctx, st, cut, turn, resp); err != nil {
				return err
			}
			continue
		}
		if calls := appendAnswer(st, resp, turn); len(calls) > 0 {
			if err := r.runTools(ctx, st, calls, span, tools); err != nil {
				return &Error{Op: "tool", Turn: turn, Err: err}
			}
			r.turnDone(ctx, st)
			continue
		}
		tools.discard() // a final answer: nothing should have started
		if done, err := r.final(ctx, st, turn); done {
			return err
		}
	}
}

// mayStart returns the error that ends an agent before its next turn:
// its turns used up, or a stop asked for; nil when the turn may start.
func (r *Runner) mayStart(st *State) error {
	if st.Turns >= r.cfg.MaxTurns {
		return &Error{Op: "generate", Turn: st.Turns, Err: ErrMaxTurns}
	}
	if r.cfg.Stop != nil && r.cfg.Stop() {
		return &Error{Op: "generate", Turn: st.Turns, Err: ErrStopped}
	}
	return nil
}

// appendAnswer appends resp's message, the answer of turn, to st's
// conversation as the assistant's and returns its tool calls, each with
// its ID set.
func appendAnswer(st *State, resp *llm.Response, turn int) []llm.ToolCall {
	st.Messages = append(st.Messages, resp.Message)
	msg := &st.Messages[len(st.Messages)-1]
	msg.Role = llm.RoleAssistant
	for i := range msg.ToolCalls {
		msg.ToolCalls[i].ID = callID(msg.ToolCalls[i], turn, i)
	}
	return msg.ToolCalls
}

// final handles the final answer of turn, the last of st's messages: it
// sets st.Output and reports done when the answer is valid; when it is
// not, it asks for a correction (done is false) while the corrections
// last, and ends the agent with a "validate" *Error once they are used up.
func (r *Runner) final(ctx context.Context, st *State, turn int) (done bool, _ error) {
	text := st.Messages[len(st.Messages)-1].Content
	st.Raw = text
	out, err := r.answer(st, text)
	if err == nil {
		st.Output = out
		r.turnDone(ctx, st)
		return true, nil
	}
	verr, ok := errors.AsType[*schema.ValidationError](err)
	if !ok || st.Corrections >= r.cfg.MaxRetries {
		// No OnTurn: the caller has the failed agent's final state.
		return true, &Error{Op: "validate", Turn: turn, Err: err}
	}
	st.Corrections++
	feedback := schema.Feedback(verr)
	if o := observerOf(ctx); o != nil {
		o.Retry(ctx, turn, feedback)
	}
	st.Messages = append(st.Messages, llm.Message{Role: llm.RoleUser, Content: feedback})
	r.turnDone(ctx, st)
	return false, nil
}

// observedGenerate is generate, watched by the context's Observer, with
// the turn's tool calls started mid-stream in tools (nil: none). It
// records the turn's span, failed or not, and returns its position in
// st.Spans (see record). The span lives in this frame, not Run's: Run's
// frame is on the stack of every step of the turn (schema validation
// goes deep), and a larger one made every agent's goroutine grow its
// stack once more (bench scale: +20% CPU). The observed turn is apart, so
// that this frame, under every model call, holds little but the span.
func (r *Runner) observedGenerate(ctx context.Context, st *State, tools *early) (*llm.Response, int, error) {
	sp := job.Span{Turn: st.Turns}
	var (
		resp *llm.Response
		err  error
	)
	if o := observerOf(ctx); o == nil {
		resp, err = r.generate(ctx, st, &sp, tools)
	} else {
		resp, err = r.observedTurn(ctx, o, st, &sp, tools)
	}
	return resp, record(st, &sp), err
}

// observedTurn is generate watched by the Observer o.
//
//go:noinline
func (r *Runner) observedTurn(ctx context.Context, o Observer, st *State, sp *job.Span, tools *early) (*llm.Response, error) {
	ctx, end := o.Turn(ctx, st.Turns)
	resp, err := r.generate(ctx, st, sp, tools)
	end(resp, err)
	return resp, err
}

// record appends sp, a turn's span, to st's spans and returns its
// position; -1 when st holds job.MaxSpans already and sp is dropped.
// Inlined, it would add its append to observedGenerate's frame.
//
//go:noinline
func record(st *State, sp *job.Span) int {
	if len(st.Spans) >= job.MaxSpans {
		return -1
	}
	st.Spans = append(st.Spans, *sp)
	return len(st.Spans) - 1
}

// answer returns the output of a final answer: its text as a JSON string
// without a schema, else the JSON the schema accepts (repaired if need
// be); then passed through Check. A rejected answer's error is a
// *schema.ValidationError.
func (r *Runner) answer(st *State, text string) (json.RawMessage, error) {
	var out json.RawMessage
	if r.cfg.Schema == nil {
		out, _ = json.Marshal(text)
	} else {
		parsed, repairs, err := r.cfg.Schema.ParseRepaired(text)
		if err != nil {
			return nil, err
		}
		st.Repairs += len(repairs)
		out = parsed
	}
	if r.cfg.Check != nil {
		if cerr := check(r.cfg.Check, out); cerr != nil {
			if _, ok := errors.AsType[*job.PanicError](cerr); ok {
				return nil, cerr // a bug, not an answer to correct
			}
			return nil, schema.CheckError(cerr)
		}
	}
	return out, nil
}

func (r *Runner) turnDone(ctx context.Context, st *State) {
	if r.cfg.OnTurn != nil {
		r.cfg.OnTurn(ctx, st)
	}
}

// generate makes one model call, retrying transient failures with back-off.
// The slot is held only during the call itself. The turn's times go into
// st's Timings and sp. Tool calls complete while the answer streams start
// in tools (nil: none start early); those of a failed call are discarded
// before the next. A conversation near the context window is compacted
// first, and again after the server refuses its length (compact.go).
func (r *Runner) generate(ctx context.Context, st *State, sp *job.Span, tools *early) (*llm.Response, error) {
	req, err := r.fit(st, r.Request(st))
	if err != nil {
		return nil, err
	}
	// The retries' state, and the wait before each, are apart from this
	// frame, which is on the stack under every model call: most calls
	// succeed at once.
	var rs *retries // nil until a call fails
	for {
		resp, err := r.call(ctx, st, req, sp, tools)
		if err == nil {
			return resp, nil
		}
		tools.discard() // a retry may answer with other calls
		if rs == nil {
			rs = new(retries)
		}
		if req, err = r.retry(ctx, st, req, sp, rs, err); err != nil {
			return nil, err
		}
	}
}

// retries is the state of one model call's retries (see generate).
type retries struct {
	relearnt int       // resends after a refused length (compact.go)
	attempt  int       // retries of failures other than outages
	outage   int       // retries in the current outage
	since    time.Time // when the current outage began: its first failure
	lastFail time.Time // the agent's last outage failure
	last     error     // the last transient failure retried; nil: none
}

// interrupted returns err, the error of a call that ctx ended (its
// deadline, the agent's budget, a cancellation) while the call was retried
// after last (nil: none), with last kept beside it: the result then names
// the failure it was retrying (a refused connection), not only the
// deadline. An err of the backend's own is returned as it is.
func interrupted(err, last error) error {
	if last == nil || err == last {
		return err
	}
	if _, ok := errors.AsType[*llm.APIError](err); ok {
		return err
	}
	return fmt.Errorf("%w (retrying after: %w)", err, last)
}

// retry decides what follows err, the failure of a model call with req:
// the request to send again (after the back-off it waited, counted in
// st's Timings and sp), or the error that ends the call.
func (r *Runner) retry(ctx context.Context, st *State, req *llm.Request, sp *job.Span, rs *retries, err error) (*llm.Request, error) {
	if ctx.Err() == nil && errors.Is(err, llm.ErrContextLength) {
		return r.relearn(st, req, err, &rs.relearnt)
	}
	if ctx.Err() != nil {
		return nil, interrupted(err, rs.last)
	}
	if !llm.IsTransient(err) && !errors.Is(err, job.ErrLimitUnavailable) {
		return nil, err
	}
	rs.last = err
	var wait time.Duration
	if r.cfg.OutageBudget > 0 && isOutage(err) {
		now := time.Now()
		if rs.since.IsZero() || r.answers != nil && r.answers.LastAnswer().After(rs.lastFail) {
			// From the failure, not the call's start: the wait for a
			// slot before it is not an outage. The backend answered
			// another call since this agent's last failure: a new
			// outage begins, the time between was not one.
			rs.since, rs.outage = now, 0
		}
		rs.lastFail = now
		elapsed := now.Sub(rs.since)
		if elapsed >= r.cfg.OutageBudget {
			return nil, fmt.Errorf("no answer for %v (outage budget %v): %w", elapsed.Round(time.Millisecond), r.cfg.OutageBudget, err)
		}
		wait = min(r.cfg.Backoff.Delay(min(rs.outage, maxOutageAttempt), err), r.cfg.OutageBudget-elapsed)
		rs.outage++
	} else {
		if rs.attempt >= r.cfg.MaxRetries {
			return nil, err
		}
		wait = r.cfg.Backoff.Delay(rs.attempt, err)
		rs.attempt++
	}
	st.Retries++
	t := time.NewTimer(wait)
	select {
	case <-t.C:
	case <-r.cfg.Stopped:
		t.Stop()
		return nil, ErrStopped
	case <-ctx.Done():
		t.Stop()
		return nil, interrupted(ctx.Err(), err)
	}
	st.Timings.Backoff += wait
	sp.Backoff += wait
	if r.cfg.Stop != nil && r.cfg.Stop() {
		return nil, ErrStopped
	}
	return req, nil
}

// Request returns the request the agent's next turn sends for st: the
// shared prefix (the system prompt with the output schema's instructions
// appended), then st's messages, with the tool definitions, the output
// spec, the token cap, the sampling settings and st's input. For a fresh
// agent, whose st holds one user message (its task), it is the agent's
// first request; for the zero State it holds the shared prefix alone,
// which is what every agent of the job sends first (a dry run counts its
// tokens once).
//
// The request shares its tools, output spec and prefix with r: the caller
// must not modify it. Request makes no model call and is safe for
// concurrent use.
func (r *Runner) Request(st *State) *llm.Request {
	return &llm.Request{
		Model:     r.cfg.ModelName,
		Messages:  r.messages(st),
		Tools:     r.tools,
		Output:    r.output,
		MaxTokens: r.maxTokens(st),

		Temperature: r.cfg.Temperature,
		TopP:        r.cfg.TopP,
		Seed:        r.cfg.Seed,
		Stop:        r.cfg.StopSequences,
		Input:       st.Input,
	}
}

// isOutage reports whether err says the backend could not answer for now
// (rate limit, overload, connection, timeout), or that a limit shared with
// other processes could not be reached (job.ErrLimitUnavailable: a Redis
// restarting), as opposed to a server error or a bad answer.
func isOutage(err error) bool {
	return errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrOverloaded) ||
		errors.Is(err, llm.ErrConnection) || errors.Is(err, llm.ErrTimeout) ||
		errors.Is(err, job.ErrLimitUnavailable)
}

// messages returns the request's conversation: the shared prefix followed
// by the agent's own messages.
func (r *Runner) messages(st *State) []llm.Message {
	if len(r.prefix) == 0 {
		return st.Messages
	}
	msgs := make([]llm.Message, 0, len(r.prefix)+len(st.Messages))
	msgs = append(msgs, r.prefix...)
	return append(msgs, st.Messages...)
}

// call acquires a slot, runs one model call and releases the slot; its
// times go into st's Timings and sp, whose Start is the first call's
// readiness. Its frame is on the stack under the model call, so it keeps
// little: the wait for the slot, the observed call and the accounting are
// in functions of their own, and its times are durations from sp.Start.
func (r *Runner) call(ctx context.Context, st *State, req *llm.Request, sp *job.Span, tools *early) (*llm.Response, error) {
	now := time.Now()
	if sp.Start.IsZero() {
		sp.Start = now
	}
	ready := now.Sub(sp.Start)
	permit, err := r.admit(ctx, st, req, sp, ready)
	if err != nil {
		return nil, err
	}
	start := time.Since(sp.Start)
	queued(st, sp, start-ready)
	st.ModelCalls++
	r.cfg.Gauges.add(calling, 1)
	var (
		resp  *llm.Response
		first time.Time
	)
	switch o := observerOf(ctx); {
	case o != nil:
		resp, first, err = r.observedCall(ctx, o, st.Turns, req, permit, tools)
	case r.stream != nil:
		ap, _ := permit.(AnswerPermit)
		resp, first, err = r.consume(ctx, req, ap, tools)
	default:
		resp, err = generate(ctx, r.cfg.Model, req)
		first = time.Now()
	}
	end := time.Since(sp.Start)
	r.cfg.Gauges.add(calling, -1)
	if permit != nil {
		permit.Release(resp, err)
	}
	called(st, sp, end-start)
	if err != nil {
		return nil, err
	}
	// From the request's sending, not the turn's readiness: the wait for
	// the slot is Queue's, and the back-off before a retry Backoff's.
	sp.TTFT = max(first.Sub(sp.Start)-start, 0)
	if st.Timings.TTFT == 0 {
		st.Timings.TTFT = sp.TTFT
	}
	resp.Usage = r.withMediaTokens(req, resp.Usage)
	st.Usage = st.Usage.Add(resp.Usage)
	return resp, nil
}

// queued counts d, time a call waited for its slot, in st's Timings and sp.
func queued(st *State, sp *job.Span, d time.Duration) {
	st.Timings.Queue += d
	sp.Queue += d
}

// called counts d, the time of a model call, in st's Timings and sp.
func called(st *State, sp *job.Span, d time.Duration) {
	st.Timings.Inference += d
	sp.Inference += d
}

// admit waits for the slot of a call ready since ready (from sp.Start);
// it returns a nil Permit without a Gate, and ErrStopped when a graceful
// stop began while the call waited. The time waited of a call that does
// not go ahead is counted here.
func (r *Runner) admit(ctx context.Context, st *State, req *llm.Request, sp *job.Span, ready time.Duration) (Permit, error) {
	var permit Permit
	if r.cfg.Gate != nil {
		var err error
		r.cfg.Gauges.add(waiting, 1)
		permit, err = r.cfg.Gate.Acquire(ctx, st.Turns, req)
		r.cfg.Gauges.add(waiting, -1)
		if err != nil {
			queued(st, sp, time.Since(sp.Start)-ready)
			return nil, err
		}
	}
	if r.cfg.Stop != nil && r.cfg.Stop() {
		// A graceful stop began while this call waited for its slot: the
		// turn never started, so it is not run.
		if permit != nil {
			permit.Release(nil, ErrStopped)
		}
		queued(st, sp, time.Since(sp.Start)-ready)
		return nil, ErrStopped
	}
	return permit, nil
}

// observedCall is invoke watched by the Observer o, for turn.
//
//go:noinline
func (r *Runner) observedCall(ctx context.Context, o Observer, turn int, req *llm.Request, permit Permit, tools *early) (resp *llm.Response, first time.Time, err error) {
	ctx, end := o.ModelCall(ctx, turn, req)
	defer func() { end(resp, err) }()
	return r.invoke(ctx, req, permit, tools)
}

// invoke sends req to the model, streamed when it streams; first is when
// the answer began.
func (r *Runner) invoke(ctx context.Context, req *llm.Request, permit Permit, tools *early) (*llm.Response, time.Time, error) {
	if r.stream != nil {
		ap, _ := permit.(AnswerPermit)
		return r.consume(ctx, req, ap, tools)
	}
	resp, err := generate(ctx, r.cfg.Model, req)
	return resp, time.Now(), err
}

// consume runs a streamed call and reassembles the response; first is when
// the first event arrived, and ap (nil: none) is told then. Each tool call
// the stream says is complete starts in tools at once.
func (r *Runner) consume(ctx context.Context, req *llm.Request, ap AnswerPermit, tools *early) (*llm.Response, time.Time, error) {
	rs := &reassembly{r: r, ap: ap, tools: tools, acc: llm.Accumulator{Limit: llm.AnswerLimit(req.MaxTokens), MaxTokens: req.MaxTokens}}
	if err := stream(ctx, r.stream, req, rs.add); err != nil && rs.err == nil {
		rs.err = err // add's false, at an error, closes the stream
	}
	if rs.err != nil {
		return nil, rs.first, rs.err
	}
	if rs.first.IsZero() {
		rs.first = time.Now()
	}
	return rs.acc.Response(), rs.first, nil
}

// reassembly is the state of consume: one value on the heap per call,
// where a range-over-func loop moved each of its variables there on its
// own.
type reassembly struct {
	r     *Runner
	ap    AnswerPermit
	tools *early
	acc   llm.Accumulator
	first time.Time // when the first event came; zero before
	err   error     // the error that ended the stream
}

// add takes the stream's next event; it returns false to end the stream
// at an error, kept in rs.err.
func (rs *reassembly) add(ev llm.Event, err error) bool {
	if err != nil {
		rs.err = err
		return false
	}
	if rs.first.IsZero() {
		rs.first = time.Now()
		if rs.ap != nil {
			rs.ap.Answering()
		}
	}
	if err := rs.acc.Add(ev); err != nil {
		rs.err = err
		return false
	}
	if ev.Type == llm.EventToolCallDone && rs.tools != nil {
		if pos, c, ok := rs.acc.ToolCall(ev.ToolCall.Index); ok {
			rs.tools.start(rs.r, pos, c)
		}
	}
	return true
}

// runTools executes the calls of one turn concurrently through the pool and
// appends one tool message per call, in call order; calls that began while
// the answer streamed (in tools, nil: none) are not run again, only
// waited for. The time from the first call's start to the last one's end
// goes into st's Timings and, unless span is -1, into st.Spans[span]. It
// returns an error only for a fatal tool failure or a done ctx.
//
// Its frame is on the stack while the tools run: what comes before and
// after is in functions of their own.
func (r *Runner) runTools(ctx context.Context, st *State, calls []llm.ToolCall, span int, tools *early) error {
	start := time.Now()
	st.ToolCalls += len(calls)
	results := make([]llm.Message, len(calls))
	errs := make([]error, len(calls))
	r.cfg.Gauges.add(inTools, 1)
	tools.settle(calls)
	end := r.execCalls(ctx, st.Turns-1, calls, results, errs, tools)
	tools.wait()
	r.cfg.Gauges.add(inTools, -1)
	return toolsDone(ctx, st, results, errs, span, tools, start, end)
}

// execCalls executes the calls of turn that did not begin early (in
// tools), writing each one's result and error at its position in results
// and errs; one runs on the agent's goroutine, more each on one of their
// own. It returns when the last one ended, or zero when none ran.
func (r *Runner) execCalls(ctx context.Context, turn int, calls []llm.ToolCall, results []llm.Message, errs []error, tools *early) time.Time {
	rest := 0 // calls not begun early, run now
	for i := range calls {
		if tools.use(i) == nil {
			rest++
		}
	}
	switch {
	case rest == 0:
		return time.Time{}
	case rest > 1:
		r.execConcurrently(ctx, turn, calls, results, errs, tools)
		return time.Now()
	}
	for i := range calls {
		if tools.use(i) == nil {
			errs[i] = r.execTool(ctx, turn, &calls[i], &results[i])
		}
	}
	return time.Now()
}

// execConcurrently is execCalls of several calls, each on a goroutine of
// its own; it returns once they all ended.
func (r *Runner) execConcurrently(ctx context.Context, turn int, calls []llm.ToolCall, results []llm.Message, errs []error, tools *early) {
	var wg sync.WaitGroup
	for i := range calls {
		if tools.use(i) == nil {
			wg.Go(func() { errs[i] = r.execTool(ctx, turn, &calls[i], &results[i]) })
		}
	}
	wg.Wait()
}

// toolsDone takes the results of the calls begun early from tools, counts
// the time from the first call's start to the last one's end (end, for
// those execCalls ran) and appends the results to st's conversation;
// see runTools.
func toolsDone(ctx context.Context, st *State, results []llm.Message, errs []error, span int, tools *early, start, end time.Time) error {
	for i := range results {
		if run := tools.use(i); run != nil {
			results[i], errs[i] = run.result, run.err
			if run.end.After(end) {
				end = run.end
			}
		}
	}
	if first := tools.begun(); !first.IsZero() && first.Before(start) {
		start = first
	}
	took := end.Sub(start)
	st.Timings.Tools += took
	if span >= 0 {
		st.Spans[span].Tools += took
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			st.ToolErrors++
		}
	}
	for _, err := range errs {
		if errors.Is(err, tool.ErrFatal) {
			return err
		}
	}
	st.Messages = append(st.Messages, results...)
	return nil
}

// execTool executes c, a call of turn, watched by the context's Observer,
// and writes its result message to msg; the error is the tool's. A
// result with media the model takes becomes a tool message of parts (the
// text, then the media); media it does not take make the call a tool
// error naming them.
func (r *Runner) execTool(ctx context.Context, turn int, c *llm.ToolCall, msg *llm.Message) error {
	var (
		content string
		media   []llm.Part
		err     error
	)
	switch o := observerOf(ctx); {
	case o != nil:
		content, media, err = r.observedTool(ctx, o, turn, c)
	case r.cfg.Tools == nil:
		err = noTools(c.Name)
	default:
		content, media, err = r.cfg.Tools.CallMedia(ctx, c.Name, c.Arguments)
	}
	msg.Role, msg.ToolCallID, msg.Name, msg.Content = llm.RoleTool, c.ID, c.Name, content
	if err == nil && len(media) > 0 {
		if err = r.takesMedia(c.Name, media); err == nil {
			msg.Content, msg.Parts = "", toolParts(content, media)
		}
	}
	if err != nil {
		msg.IsError = true
		msg.Content = "error: " + err.Error()
	}
	return err
}

// observedTool is callTool watched by the Observer o, for turn.
//
//go:noinline
func (r *Runner) observedTool(ctx context.Context, o Observer, turn int, c *llm.ToolCall) (string, []llm.Part, error) {
	ctx, end := o.Tool(ctx, turn, *c)
	content, media, err := r.callTool(ctx, c)
	end(content, err)
	return content, media, err
}

// callTool runs c through the pool. execTool does the same inline: its
// frame is under the tool's wait.
func (r *Runner) callTool(ctx context.Context, c *llm.ToolCall) (string, []llm.Part, error) {
	if r.cfg.Tools == nil {
		return "", nil, noTools(c.Name)
	}
	return r.cfg.Tools.CallMedia(ctx, c.Name, c.Arguments)
}

// noTools is the error of a call to name by an agent without tools.
func noTools(name string) error {
	return fmt.Errorf("no tools are available; answer without calling %q", name)
}
