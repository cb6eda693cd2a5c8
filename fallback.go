package batchagent

import "github.com/batchagent/batchagent/job"

// Fallback is a tier a job's agents fall back to: another model or a Go
// function. See [job.Fallback] and [Def].Fallbacks.
type Fallback = job.Fallback

// DefaultBudget is the time budget of each agent of a job with fallbacks
// that sets none; the CLI's BATCHAGENT_BUDGET overrides it.
const DefaultBudget = job.DefaultBudget
