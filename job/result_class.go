package job

import (
	"context"
	"errors"
	"strings"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// errClasses names the error classes a failed agent's cause may belong to,
// each the sentinel errors.Is finds in it, in the order a class list is
// written. The names are stable: they are saved in checkpoints
// (agent.State.ErrClass) and written in result lines ("class").
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

// RestoreCause rebuilds a saved failure's cause from its message, classes,
// schema problems and raw answer: an error whose text is msg and which
// answers errors.Is for each class's sentinel and errors.As for a
// *schema.ValidationError holding the problems, as the original did. A
// cause that was a sentinel, or a validation error, itself comes back as
// that value. Unknown class names (of a later version) are ignored.
// Problems are saved only for a validation failure, so a cause with
// problems comes back as a validation error whatever its classes say: a
// state saved before classes were recorded has none, and one saved by a
// later version may name only classes unknown here. Any other cause with
// no known class comes back as plain text.
func RestoreCause(msg, class string, problems []schema.Problem, raw string) error {
	var errs []error
	validation := len(problems) > 0
	for name := range strings.SplitSeq(class, ",") {
		if name == classValidation {
			validation = true
			continue
		}
		for _, c := range errClasses {
			if c.name == name {
				errs = append(errs, c.err)
			}
		}
	}
	if validation {
		errs = append(errs, &schema.ValidationError{Problems: problems, Raw: raw})
	}
	switch {
	case len(errs) == 0:
		return errors.New(msg)
	case len(errs) == 1 && errs[0].Error() == msg:
		return errs[0]
	}
	return &savedError{msg: msg, classes: errs}
}

// savedError is a cause restored from a checkpoint: the original's text,
// wrapping its classes' sentinels and validation error.
type savedError struct {
	msg     string
	classes []error
}

func (e *savedError) Error() string { return e.msg }

// Unwrap returns the classes' sentinels and validation error.
func (e *savedError) Unwrap() []error { return e.classes }
