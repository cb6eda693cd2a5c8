package batchagent

import (
	"time"

	"github.com/batchagent/batchagent/job"
)

// Fallback is a tier a job's agents fall back to: another model or a Go
// function. See [job.Fallback] and [Def].Fallbacks.
type Fallback = job.Fallback

// DefaultBudget is the time budget of each agent of a job with fallbacks
// that sets none; BudgetEnv overrides it in the CLI.
const DefaultBudget = job.DefaultBudget

// MinBudget is the shortest budget a spec accepts. See [job.MinBudget].
const MinBudget = job.MinBudget

// BudgetEnv names the environment variable the CLI reads for the default
// budget: a Go duration such as "2s".
const BudgetEnv = job.BudgetEnv

// BudgetFrom returns the budget BudgetEnv sets through getenv, or 0 when
// it is unset. See [job.BudgetFrom].
func BudgetFrom(getenv func(string) string) (time.Duration, error) { return job.BudgetFrom(getenv) }

// Pack lets a job's agents share model calls: tiny tasks grouped into one
// call whose answer is a JSON object keyed by agent, each result delivered
// as its value streams in. See [job.Pack] and [Def].Pack.
type Pack = job.Pack

// DefaultPackPromptTokens is Pack.MaxPromptTokens when unset.
const DefaultPackPromptTokens = job.DefaultPackPromptTokens
