package job

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// errClasses names the error classes a failed agent's cause may belong to,
// each the sentinel errors.Is finds in it, in the order a class list is
// written. The names are stable: they are saved in checkpoints
// ([Link].Class) and written in result lines ("class").
var errClasses = []struct {
	name string
	err  error
}{
	{"rate_limited", llm.ErrRateLimited},
	{"overloaded", llm.ErrOverloaded},
	{"server", llm.ErrServer},
	{"timeout", llm.ErrTimeout},
	{"connection", llm.ErrConnection},
	{"context_length", llm.ErrContextLength},
	{"bad_request", llm.ErrBadRequest},
	{"auth", llm.ErrAuth},
	{"truncated", llm.ErrTruncated},
	{"canceled", context.Canceled},
	{"deadline", context.DeadlineExceeded},
	{"agent_timeout", ErrAgentTimeout},
	{"max_turns", ErrMaxTurns},
	{"stopped", ErrStopped},
	{"tool_fatal", tool.ErrFatal},
	{"no_json", schema.ErrNoJSON},
	{"checkpoint", ErrCheckpoint},
	{"backend_unavailable", ErrBackendUnavailable},
	{"limit_unavailable", ErrLimitUnavailable},
	{"panic", ErrPanic},
}

// ErrBackendUnavailable ends a run whose backend never answered: no model
// call got an answer while the run was in progress, and connections to the
// backend failed for the start window (admission.Config.StartWindow), or
// an agent spent its outage budget on connection failures. The agents it
// stops get results of kind [KindCanceled] whose error wraps it
// (errors.Is), as do the inputs not started under Engine.Run (Stream
// yields nothing for those, as after a cancellation); nothing is
// checkpointed for them, so with a Checkpoint they stay pending for the
// next run. Its message names the last connection failure. The check
// applies to the calls the engine gates: every backend that declares its
// capabilities (all HTTP backends), or any with a limit set. The engine
// adds it to the error of a run that package sched declared down
// (sched.ErrUnavailable), so that job need not import sched.
var ErrBackendUnavailable = errors.New("backend unavailable")

// ErrLimitUnavailable is wrapped by the error of a model call that could
// not be admitted because a limit shared with other processes (rate
// budgets or slots kept in Redis) could not be reached: agents wait it out
// like a backend outage. The engine adds it to an admission error that
// wraps sched.ErrSharedUnavailable (a shared limit of another module);
// package queue's limits wrap it directly.
var ErrLimitUnavailable = errors.New("shared limit unavailable")

// classValidation names a cause holding a *schema.ValidationError.
const classValidation = "validation"

// classOf returns the classes of err: the name of every sentinel of
// errClasses that errors.Is finds in it, then "validation" when errors.As
// finds a *schema.ValidationError, joined by commas; "" for none.
func classOf(err error) string {
	var names []string
	for _, c := range errClasses {
		if errors.Is(err, c.err) {
			names = append(names, c.name)
		}
	}
	if _, ok := errors.AsType[*schema.ValidationError](err); ok {
		names = append(names, classValidation)
	}
	return strings.Join(names, ",")
}

// Failure is a failed agent's error as saved data: what a checkpoint keeps
// of it, in one shape, and rebuilds it from ([Failure.AgentError]) when a
// run resumes or its results are exported. [FailureOf] makes one.
type Failure struct {
	// Kind classifies the failure.
	Kind Kind `json:"kind"`
	// Op is the failed step: "input", "render", "generate", "tool",
	// "validate".
	Op string `json:"op,omitempty"`
	// Turn is the 0-based turn that failed; -1 if it failed before the
	// first turn.
	Turn int `json:"turn"`
	// Cause is the cause's chain, the cause first: each link the error the
	// one before wraps (errors.Unwrap), down to the last that still
	// belongs to a class. An error that wraps several (errors.Join) ends
	// the chain: its link's classes hold those of all it wraps.
	Cause []Link `json:"cause,omitempty"`
	// Problems are the schema problems of a validation failure.
	Problems []schema.Problem `json:"problems,omitempty"`
}

// Link is one error of a [Failure]'s cause chain.
type Link struct {
	// Message is the error's text.
	Message string `json:"message"`
	// Class names the classes of the error, those errors.Is and errors.As
	// find in it (so those of the links after it too), joined by commas
	// ("rate_limited", "validation", "backend_unavailable,rate_limited"),
	// as result lines write them ("class"); "" for none known.
	Class string `json:"class,omitempty"`
}

// maxLinks bounds a saved cause chain: each link's text holds those of the
// links after it, so a deep chain would grow as its square.
const maxLinks = 8

// FailureOf returns err, the error of a failed agent's result, as saved
// data: its kind, failed step, turn (-1 when none), cause chain and schema
// problems, as [Describe] flattens them.
func FailureOf(err error) *Failure {
	f := &Failure{Kind: KindOf(err), Turn: -1}
	cause := err
	if ae, ok := errors.AsType[*AgentError](err); ok {
		f.Op, f.Turn, f.Problems, cause = ae.Op, ae.Turn, ae.Problems(), ae.Err
	}
	for e := cause; e != nil && len(f.Cause) < maxLinks; e = errors.Unwrap(e) {
		class := classOf(e)
		if len(f.Cause) > 0 && class == "" {
			break // nothing below to answer errors.Is for
		}
		f.Cause = append(f.Cause, Link{Message: e.Error(), Class: class})
	}
	return f
}

// Clone returns a deep copy of f; nil for nil.
func (f *Failure) Clone() *Failure {
	if f == nil {
		return nil
	}
	c := *f
	c.Cause = slices.Clone(f.Cause)
	c.Problems = slices.Clone(f.Problems)
	return &c
}

// AgentError rebuilds the error of agent index of job jobID from f, raw
// being the agent's last final answer (the invalid output of a validation
// failure). Its cause has the saved text and answers errors.Is for each
// saved class's sentinel and errors.As for a *schema.ValidationError
// holding the problems and raw, as the original did, link by link along
// the chain. A link that was a sentinel, or a validation error, itself
// comes back as that value. Unknown class names (of a later version) are
// ignored. Problems are saved only for a validation failure, so a failure
// with problems comes back as a validation error whatever its classes
// say: a state saved before classes were recorded has none, and one saved
// by a later version may name only classes unknown here. Any other cause
// with no known class comes back as plain text. A nil f rebuilds an error
// with no kind, step or text.
func (f *Failure) AgentError(jobID string, index int, raw string) *AgentError {
	if f == nil {
		f = &Failure{}
	}
	chain := f.Cause
	if len(chain) == 0 {
		chain = []Link{{}}
	}
	validation := len(f.Problems) > 0 && !slices.ContainsFunc(chain, func(l Link) bool { return hasClass(l.Class, classValidation) })
	var cause error
	for i := len(chain) - 1; i >= 0; i-- {
		cause = restoreLink(chain[i], cause, validation, f.Problems, raw)
		validation = false // the innermost link answers it for all
	}
	return &AgentError{JobID: jobID, Agent: index, Turn: f.Turn, Op: f.Op, Kind: f.Kind, Err: cause}
}

// restoreLink rebuilds the error of link l, which wraps inner (nil for
// the last link): an error with l's text wrapping inner and the sentinels
// and validation error of the classes inner does not answer already.
// validation adds a validation error whatever l's classes say.
func restoreLink(l Link, inner error, validation bool, problems []schema.Problem, raw string) error {
	var errs []error
	if inner != nil {
		errs = append(errs, inner)
	}
	for name := range strings.SplitSeq(l.Class, ",") {
		if name == classValidation {
			validation = true
			continue
		}
		for _, c := range errClasses {
			if c.name == name && !errors.Is(inner, c.err) {
				errs = append(errs, c.err)
			}
		}
	}
	if _, ok := errors.AsType[*schema.ValidationError](inner); validation && !ok {
		errs = append(errs, &schema.ValidationError{Problems: problems, Raw: raw})
	}
	switch {
	case len(errs) == 0:
		return errors.New(l.Message)
	case len(errs) == 1 && errs[0].Error() == l.Message:
		return errs[0]
	}
	return &linkError{msg: l.Message, wraps: errs}
}

// hasClass reports whether the class list classes names class.
func hasClass(classes, class string) bool {
	for name := range strings.SplitSeq(classes, ",") {
		if name == class {
			return true
		}
	}
	return false
}

// linkError is a link of a cause restored from a checkpoint: the
// original's text, wrapping the error of the next link of its chain and its classes'
// sentinels and validation error.
type linkError struct {
	msg   string
	wraps []error
}

func (e *linkError) Error() string { return e.msg }

// Unwrap returns the next link's error, the classes' sentinels and
// validation error.
func (e *linkError) Unwrap() []error { return e.wraps }
