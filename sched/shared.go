package sched

import (
	"context"
	"errors"
)

// ErrSharedUnavailable is wrapped by the error of a [Shared] or
// [SharedSlots] whose store cannot be reached for now (a Redis restarting
// or failing over): callers wait it out like a backend outage, within the
// same outage budget, rather than fail the call at once. Other errors of
// theirs are permanent.
var ErrSharedUnavailable = errors.New("shared limit unavailable")

// Shared is an admission budget a backend shares with other processes:
// requests and tokens per minute kept in a store they all reach (package
// queue's SharedRate keeps them in Redis), so that N processes calling one
// account stay within one limit, not N times it. Every process's [Gate]
// for the backend waits on it ([GateConfig.Shared]).
//
// Implementations must be safe for concurrent use.
type Shared interface {
	// Wait blocks until one request of tokens estimated tokens fits the
	// shared budgets, and takes it from them (tokens 0: the request
	// counts against a request budget only). It returns ctx's error when
	// ctx ends first, and an error when the budget cannot be read
	// (wrapping [ErrSharedUnavailable] when its store is unreachable for
	// now): the Gate then admits nothing, and [Gate.Acquire] returns that
	// error.
	Wait(ctx context.Context, tokens int) error
	// Correct charges the difference between a request's estimated and
	// actual tokens once its usage is known. It must not block for long:
	// the Gate calls it as a call is released.
	Correct(ctx context.Context, estimated, actual int)
}

// SharedSlots is a concurrency limit a backend shares with other
// processes: at most its limit of calls are in flight over all of them
// (package queue's SharedSlots keeps leases and an adaptive limit in
// Redis). Every process's [Gate] for the backend takes a shared slot after
// its own ([GateConfig.SharedSlots]).
//
// Implementations must be safe for concurrent use.
type SharedSlots interface {
	// Acquire blocks until a shared slot is free and takes it, returning
	// its lease. It returns ctx's error when ctx ends first, and an error
	// when the limit cannot be read (wrapping [ErrSharedUnavailable] when
	// its store is unreachable for now): the Gate then admits nothing. A
	// lease lives no longer than its holder: an implementation keeps it
	// while the holder runs and lets it lapse soon after the holder dies.
	Acquire(ctx context.Context) (lease string, err error)
	// Release gives the lease back, with what the call's answer said:
	// clean (a success) or congested (the backend refused or rate-limited
	// it, or could not be reached), or neither. It must not block for long.
	Release(ctx context.Context, lease string, clean, congested bool)
}
