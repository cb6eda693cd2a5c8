package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// DefaultBudget is the time budget of each agent of a job with fallbacks
// that sets none.
const DefaultBudget = 60 * time.Second

// Fallback is one tier an agent falls back to when the tier before it
// failed on its backend (kinds backend, rate_limit, timeout or truncated,
// or its backend's circuit breaker is open) or the agent's time budget
// ran out. A tier is either another model (Model, with ModelName) or a Go
// function (Func, for example a game's rule-based planner); exactly one
// of Model and Func is set.
type Fallback struct {
	// Model answers the agent again, from its task, with the same agent
	// loop (system prompt, tools, schema and limits). It runs within what
	// is left of the budget, or, once that is spent, within a quarter of
	// the budget.
	Model llm.Model
	// ModelName is passed to Model's backend. Defaults to "".
	ModelName string
	// Func answers the agent from its input. Its output must satisfy the
	// job's output schema, if any. It runs with a deadline of FuncTimeout.
	// It is called from many goroutines at once.
	Func func(ctx context.Context, in Input) (json.RawMessage, error)
}

// MinBudget is the shortest Budget a Spec accepts: no model call over a
// network answers faster, and a model tier tried once the budget is spent
// gets only a quarter of it. A budget the backends cannot meet makes every
// agent fall through its tiers; it never opens a circuit breaker, which
// counts only the backends' own failures.
const MinBudget = 10 * time.Millisecond

// FuncTimeout is the deadline of a Fallback's Func.
const FuncTimeout = time.Second

// Budget returns the time budget of each agent, and the job's fallback
// tiers; the budget is zero when the job has no fallbacks: such a job's
// agents are bounded only by Timeout.
func (s *Spec) Budget() (time.Duration, []Fallback) {
	if len(s.def.Fallbacks) == 0 {
		return 0, nil
	}
	return s.def.Budget, append([]Fallback(nil), s.def.Fallbacks...)
}

// BudgetEnv is the environment variable that overrides DefaultBudget in
// the CLI (and in programs that call BudgetFrom): a Go duration, "2s".
const BudgetEnv = "BATCHAGENT_BUDGET"

// BudgetFrom returns the budget BudgetEnv sets through getenv (os.Getenv,
// or a test's map), or 0 when it is unset: the caller puts it in
// Def.Budget when that is zero. The library itself reads no environment.
func BudgetFrom(getenv func(string) string) (time.Duration, error) {
	v := getenv(BudgetEnv)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 2s", BudgetEnv, v)
	}
	if d < MinBudget {
		return 0, fmt.Errorf("%s=%q: below the %v minimum, which no model call could meet", BudgetEnv, v, MinBudget)
	}
	return d, nil
}
