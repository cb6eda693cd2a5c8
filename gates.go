package batchagent

import (
	"github.com/batchagent/batchagent/admission"
	"github.com/batchagent/batchagent/job"
)

// The admission of model calls to each backend, configured in package
// admission (see its documentation and [admission.Config]).
type (
	// Admission configures how model calls to one backend are admitted:
	// concurrency, rate, backpressure, order and prefix warming.
	Admission = admission.Config
	// Backend names a backend for [Config.Backends]: the llm.Model value
	// and the model name a Spec sends to it.
	Backend = admission.Backend
	// RateLimit paces model calls to a hosted API's limits.
	RateLimit = admission.RateLimit
	// Backpressure holds admission back while a self-hosted server's
	// queue is long.
	Backpressure = admission.Backpressure
	// Policy names an order of the model calls that wait for a backend's
	// slots.
	Policy = admission.Policy
	// Breaker configures the circuit breaker of each backend that jobs
	// with fallbacks use.
	Breaker = admission.Breaker
	// BackendStats is a snapshot of one backend's admission.
	BackendStats = admission.Stats
)

// The policies and the defaults of [Admission]; see package admission.
const (
	PolicyFIFO           = admission.PolicyFIFO
	PolicyTurns          = admission.PolicyTurns
	PolicyLAS            = admission.PolicyLAS
	DefaultPolicy        = admission.DefaultPolicy
	DefaultMaxQueued     = admission.DefaultMaxQueued
	DefaultProbeInterval = admission.DefaultProbeInterval
	DefaultStartWindow   = admission.DefaultStartWindow
	FirstStartWindow     = admission.FirstStartWindow
)

// ErrBackendUnavailable ends a run whose backend never answered (see
// [job.ErrBackendUnavailable]): its agents get results of kind
// [KindCanceled] that wrap it, and nothing is checkpointed for them.
var ErrBackendUnavailable = job.ErrBackendUnavailable
