package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
	"github.com/batchagent/batchagent/schema"
)

// ErrBudget is the cause of an agent's context once its time budget ran
// out.
var ErrBudget = errors.New("time budget spent")

// ErrBreakerOpen is the error of a tier skipped because its backend's
// circuit breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open: backend skipped")

// errUncounted is what a breaker is told of a run that says nothing of its
// backend: cut by the budget, a deadline or a cancellation before the
// backend failed. It counts neither as a failure nor as a success.
var errUncounted = errors.New("not the backend's outcome")

// A tier is one fallback of a runner: a model's agent loop or a function.
type tier struct {
	agent *agent.Runner
	g     *gate                                      // the model's admission; nil for a function
	br    *gobreaker.TwoStepCircuitBreaker[struct{}] // nil: none
	fn    func(ctx context.Context, in job.Input) (json.RawMessage, error)
}

// fallbacks is what a runner of a job with fallbacks keeps.
type fallbacks struct {
	budget  time.Duration
	primary *gobreaker.TwoStepCircuitBreaker[struct{}] // nil: none
	tiers   []tier
	schema  *schema.Schema
}

// maxTiers bounds the tiers counted apart; later tiers count as the last.
const maxTiers = 8

// ByTier returns the answers (results without an error) by the tier that
// gave them (tiers past the eighth count as the eighth), and the breakers'
// state changes.
func (e *Engine) ByTier() (map[int]int64, int64) {
	m := map[int]int64{}
	for i := range e.stats.byTier {
		if n := e.stats.byTier[i].Load(); n > 0 {
			m[i] = n
		}
	}
	return m, e.breakerChanges.Load()
}

// breakerOf returns the circuit breaker of the backend m serves under
// name, building it on first use; nil when breakers are disabled or m is
// not comparable (it cannot be shared).
func (e *Engine) breakerOf(m llm.Model, name string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	b := e.opt.Breaker
	if b.Disabled || !reflect.TypeOf(m).Comparable() {
		return nil
	}
	key := backendKey{m, name}
	if v, ok := e.breakers.Load(key); ok {
		return v.(*gobreaker.TwoStepCircuitBreaker[struct{}])
	}
	failures, cooldown := b.Failures, b.Cooldown
	if failures <= 0 {
		failures = 5
	}
	if cooldown <= 0 {
		cooldown = 30 * time.Second
	}
	br := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        fmt.Sprintf("%T/%s", m, name),
		MaxRequests: 1,
		Timeout:     cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(failures) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errUncounted) },
		OnStateChange: func(n string, from, to gobreaker.State) {
			e.breakerChanges.Add(1)
			e.log.Info("circuit breaker", "backend", n, "from", from.String(), "to", to.String())
		},
	})
	v, _ := e.breakers.LoadOrStore(key, br)
	return v.(*gobreaker.TwoStepCircuitBreaker[struct{}])
}

// fallbacksOf builds the fallback tiers of spec, or returns nil when it has
// none; cfg is the primary's agent configuration.
func (e *Engine) fallbacksOf(spec *job.Spec, cfg agent.Config, class sched.Class) (*fallbacks, error) {
	budget, fbs := spec.Budget()
	if len(fbs) == 0 {
		return nil, nil
	}
	f := &fallbacks{budget: budget, schema: spec.Schema(), primary: e.breakerOf(cfg.Model, cfg.ModelName)}
	for i, fb := range fbs {
		if fb.Func != nil {
			f.tiers = append(f.tiers, tier{fn: fb.Func})
			continue
		}
		c := cfg
		c.Model, c.ModelName, c.OnTurn, c.Gate = fb.Model, fb.ModelName, nil, nil
		c.ContextWindow = 0 // the primary model's; a tier's window is learnt from its refusals
		g, err := e.gateFor(fb.Model, fb.ModelName, nil)
		if err != nil {
			return nil, fmt.Errorf("fallback %d: %w", i+1, err)
		}
		if g.gated {
			c.Gate = &classGate{g: g, class: class}
		}
		a, err := agent.New(c)
		if err != nil {
			return nil, fmt.Errorf("%w: fallback %d: %v", job.ErrBadSpec, i+1, err)
		}
		f.tiers = append(f.tiers, tier{agent: a, g: g, br: e.breakerOf(fb.Model, fb.ModelName)})
	}
	return f, nil
}

// beginTiers registers a run, for the unavailability check, on the gate
// of each model tier of f: by tier, nil for a function or an ungated
// model. It returns nil for a nil f.
func (f *fallbacks) beginTiers(ctx context.Context) []*sched.Run {
	if f == nil {
		return nil
	}
	runs := make([]*sched.Run, len(f.tiers))
	for i, tr := range f.tiers {
		if tr.g != nil && tr.g.gated {
			runs[i] = tr.g.g.BeginRun(ctx)
		}
	}
	return runs
}

// endTiers ends the runs beginTiers returned.
func (f *fallbacks) endTiers(runs []*sched.Run) {
	for i, r := range runs {
		if r != nil {
			f.tiers[i].g.g.EndRun(r)
		}
	}
}

// checked reports whether every tier of f can be found unreachable: each
// is a gated model whose run is in runs, and so is the primary (run). A
// function tier always answers, whatever the backends do.
func (f *fallbacks) checked(rn *runner, run *sched.Run, runs []*sched.Run) bool {
	if !rn.gate.gated || run == nil || len(runs) != len(f.tiers) {
		return false
	}
	for _, r := range runs {
		if r == nil {
			return false
		}
	}
	return true
}

// tiersDown tells each tier's gate how the agent's try there failed (perr
// the primary's error, errs the fallback tiers' by tier, nil where not
// tried) and returns the unavailability error once every tier's backend
// was found unreachable in this run: no call to any of them was answered
// and connections to each failed. Nil otherwise, or when a tier cannot be
// checked (see checked).
func (e *Engine) tiersDown(a *agentRun, perr error, errs []error) error {
	f := a.rn.fb
	if !f.checked(a.rn, a.run, a.tiers) {
		return nil
	}
	down := unavailable(a.rn.gate.g.GaveUp(a.run, unreached(a.rn.gate.g, a.run, perr), perr))
	if down == nil {
		return nil
	}
	msgs := make([]string, 0, len(f.tiers))
	for i, tr := range f.tiers {
		d := tr.g.g.GaveUp(a.tiers[i], unreached(tr.g.g, a.tiers[i], errs[i]), errs[i])
		if d == nil {
			return nil
		}
		msgs = append(msgs, fmt.Sprintf("fallback %d: %v", i+1, d))
	}
	return fmt.Errorf("%w; %s", down, strings.Join(msgs, "; "))
}

// unreached reports whether err, an agent's failure on the backend of g,
// says the backend could not be reached in run: a connection failure, or
// a call cut by the budget or a deadline, with no answer of the backend's
// own, while connections failed in the run and none was answered (the
// call waited for admission, paused by those failures).
func unreached(g *sched.Gate, run *sched.Run, err error) bool {
	if errors.Is(err, llm.ErrConnection) {
		return true
	}
	if _, ok := errors.AsType[*llm.APIError](err); ok || !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return g.Unreached(run)
}

// watchTiers waits until every tier of f (the primary's run and the model
// tiers' runs) declared its backend unavailable, then stops the run with
// the unavailability error; or returns when ctx ends. A job with a tier
// that cannot be checked (a function always answers) is never stopped.
func (e *Engine) watchTiers(ctx context.Context, rn *runner, run *sched.Run, runs []*sched.Run, stop context.CancelCauseFunc) {
	f := rn.fb
	if !f.checked(rn, run, runs) {
		return
	}
	msgs := make([]string, 0, len(runs))
	for i, r := range append([]*sched.Run{run}, runs...) {
		select {
		case <-r.Down():
		case <-ctx.Done():
			return
		}
		if i > 0 {
			msgs = append(msgs, fmt.Sprintf("fallback %d: %v", i, r.Err()))
		}
	}
	err := fmt.Errorf("%w; %s", unavailable(run.Err()), strings.Join(msgs, "; "))
	e.log.LogAttrs(ctx, slog.LevelError, "no tier's backend could be reached: stopping the run; unfinished inputs stay pending",
		slog.String("job", rn.id), slog.Any("err", err))
	stop(err)
}

// fallsBack reports whether a tier's failure err, in a context whose
// cause is cause, passes the agent on to the next tier.
func fallsBack(err, cause error) bool {
	if errors.Is(cause, ErrBudget) || errors.Is(err, ErrBreakerOpen) {
		return true
	}
	if errors.Is(err, agent.ErrStopped) {
		return false
	}
	switch job.Classify(err, false, false) {
	case job.KindBackend, job.KindRateLimit, job.KindTimeout, job.KindTruncated:
		return true
	}
	return false
}

// backendFailure reports whether err holds a failure of the backend
// itself: an error of the class of a server error, a failed connection,
// the backend's timeout, a rate limit or an overload (an *llm.APIError of
// our backends, or a custom llm.Model's error wrapping the class). It holds one also when a
// deadline ended the agent while it waited to retry such a failure (the
// agent keeps the last one beside the deadline); a call cut by a deadline,
// a budget or a cancellation alone holds none.
func backendFailure(err error) bool {
	return errors.Is(err, llm.ErrServer) || errors.Is(err, llm.ErrConnection) || errors.Is(err, llm.ErrTimeout) ||
		errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrOverloaded)
}

// breakerOutcome returns what a backend's breaker is told of a run of
// the agent that ended with err: nil (a success) when the backend
// answered, even with an answer the agent rejected; err when the backend
// failed; errUncounted when the budget, a deadline, a cancellation or a
// stop ended the run before the backend failed: those are not the
// backend's doing and never count toward its breaker.
func breakerOutcome(err error) error {
	switch {
	case err == nil:
		return nil
	case backendFailure(err):
		return err
	case errors.Is(err, agent.ErrStopped), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errUncounted
	}
	return nil
}

// runModel runs a on st within ctx, through br when set.
func runModel(ctx context.Context, a *agent.Runner, br *gobreaker.TwoStepCircuitBreaker[struct{}], st *agent.State) error {
	if br == nil {
		return a.Run(ctx, st)
	}
	done, err := br.Allow()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBreakerOpen, err)
	}
	err = a.Run(ctx, st)
	done(breakerOutcome(err))
	return err
}

// runTiers runs the fallback tiers of an agent whose primary failed with
// err, in order, until one answers; budgetEnd is when the agent's budget
// ends, and turns the turns the primary took. It returns the answering
// tier (or the last one tried), its error, and the state holding its work;
// its Spans are those of every model tier tried, with their Tier set and
// turns numbered on from the primary's. errs, one per tier, gets the error
// of each tier tried.
func (e *Engine) runTiers(ctx context.Context, f *fallbacks, in job.Input, task llm.Message, budgetEnd time.Time, turns int, errs []error) (int, *agent.State, error) {
	var (
		err   error
		spans []job.Span
	)
	st := &agent.State{}
	defer func() { st.Spans = spans }()
	t := 0
	for i, tr := range f.tiers {
		if ctx.Err() != nil {
			break
		}
		t = i + 1
		if tr.fn != nil {
			st = &agent.State{Status: agent.StatusRunning}
			fctx, cancel := context.WithTimeout(ctx, job.FuncTimeout)
			var out json.RawMessage
			out, err = callFunc(fctx, "function", tr.fn, in)
			cancel()
			if err == nil && f.schema != nil {
				err = f.schema.Validate(out)
			}
			if err == nil {
				st.Output = out
				return t, st, nil
			}
			err = fmt.Errorf("fallback %d (func): %w", t, err)
			errs[i] = err
			continue
		}
		d := time.Until(budgetEnd)
		if d <= 0 {
			d = f.budget / 4
		}
		tctx, cancel := context.WithTimeoutCause(ctx, d, ErrBudget)
		st = &agent.State{Input: in, Status: agent.StatusRunning, Messages: []llm.Message{task}}
		err = runModel(tctx, tr.agent, tr.br, st)
		cause := context.Cause(tctx)
		cancel()
		for _, sp := range st.Spans {
			sp.Turn += turns
			sp.Tier = t
			spans = append(spans, sp)
		}
		turns += st.Turns
		if err == nil {
			return t, st, nil
		}
		errs[i] = err
		if !fallsBack(err, cause) {
			return t, st, err
		}
	}
	return t, st, err
}

// runTiered runs the agent of a job with fallbacks: the primary within the
// agent's budget, through its backend's breaker, then, when it fails on
// its backend or runs out of budget, the fallback tiers in order; a job
// that packs tries a packed answer first. ctx is
// the run's context, actx the agent's (its Timeout).
func (e *Engine) runTiered(ctx, actx context.Context, a *agentRun) {
	f := a.rn.fb
	bctx, cancel := context.WithTimeoutCause(actx, f.budget, ErrBudget)
	defer cancel()
	packed, after, err := a.packed(bctx)
	if packed == 0 && err == nil {
		err = runModel(bctx, a.rn.agent, f.primary, a.st)
		if after != nil {
			after(a.st, err)
		}
	}
	e.ranTiered(ctx, actx, context.Cause(bctx), a, packed, err)
}

// ranTiered goes on with the agent of runTiered once the primary returned
// err, with cause its context's cause: it runs the fallback tiers when
// the primary's failure passes the agent on, and finishes the agent. Like
// Engine.ran, it keeps the result out of runTiered's frame.
func (e *Engine) ranTiered(ctx, actx context.Context, cause error, a *agentRun, packed int, err error) {
	rn, i, in, st, start := a.rn, a.i, a.in, a.st, a.start
	f := rn.fb
	r := resultOf(i, in, st)
	r.Packed = packed
	perr := err
	var errs []error // by tier; nil: the tiers were not tried
	if err != nil && fallsBack(err, cause) && actx.Err() == nil && !e.draining.Load() {
		errs = make([]error, len(f.tiers))
		t, ts, terr := e.runTiers(actx, f, in, st.Messages[0], start.Add(f.budget), st.Turns, errs)
		if t > 0 {
			st.Spans = append(st.Spans, ts.Spans[:min(len(ts.Spans), max(job.MaxSpans-len(st.Spans), 0))]...)
			r.Spans = st.Spans
			r.Tier = t
			r.ModelCalls += ts.ModelCalls
			r.Turns += ts.Turns
			r.ToolCalls += ts.ToolCalls
			r.ToolErrors += ts.ToolErrors
			r.Repairs += ts.Repairs
			r.Truncations += ts.Truncations
			r.Compactions += ts.Compactions
			r.Usage.PromptTokens += ts.Usage.PromptTokens
			r.Usage.CompletionTokens += ts.Usage.CompletionTokens
			r.Usage.CachedTokens += ts.Usage.CachedTokens
			r.Usage.MediaTokens += ts.Usage.MediaTokens
			r.Output = ts.Output
			st.Output, st.Raw = ts.Output, ts.Raw
			st.ModelCalls, st.Turns, st.ToolCalls, st.ToolErrors, st.Usage = r.ModelCalls, r.Turns, r.ToolCalls, r.ToolErrors, r.Usage
			err, cause = terr, nil
		}
	}
	r.Timings.Total = time.Since(start)
	if err != nil {
		ae := &job.AgentError{JobID: rn.id, Agent: i, Turn: -1, Op: "generate", Err: err}
		if se, ok := errors.AsType[*agent.Error](err); ok {
			ae.Turn, ae.Op, ae.Err = se.Turn, se.Op, se.Err
		}
		if errors.Is(context.Cause(actx), job.ErrAgentTimeout) {
			ae.Err = agentTimedOut(rn.timeout, ae.Err)
		}
		timedOut := errors.Is(context.Cause(actx), job.ErrAgentTimeout) || errors.Is(cause, ErrBudget)
		canceled := ctx.Err() != nil || errors.Is(err, agent.ErrStopped)
		if errs != nil {
			if down := e.tiersDown(a, perr, errs); down != nil {
				// No tier's backend could be reached: no answer came, so
				// the input stays pending, as without fallbacks.
				ae.Err, canceled, timedOut = down, true, false
			}
		}
		if canceled && e.closedNow() && !errors.Is(ae.Err, ErrShutdown) {
			ae.Err = errors.Join(ae.Err, ErrShutdown)
		}
		ae.Kind = job.Classify(ae.Err, timedOut, canceled)
		r.Err, r.Output, r.Raw = ae, nil, st.Raw
	}
	e.finish(ctx, a, st, r)
}
