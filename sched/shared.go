package sched

import "context"

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
	// ctx ends first, and an error when the budget cannot be read: the
	// Gate then admits nothing, and [Gate.Acquire] returns that error.
	Wait(ctx context.Context, tokens int) error
	// Correct charges the difference between a request's estimated and
	// actual tokens once its usage is known. It must not block for long:
	// the Gate calls it as a call is released.
	Correct(ctx context.Context, estimated, actual int)
}
