package simhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/internal/gen"
	"github.com/batchagent/batchagent/llm"
)

// Server defaults. The timing defaults are calibrated to vLLM serving
// Qwen2.5-7B on an A10G: prefilling a 2,547-token prompt takes about 0.60 s.
const (
	DefaultMaxSeqs          = 16
	DefaultMaxQueue         = 256
	DefaultPrefillPerToken  = 600 * time.Millisecond / 2547 // ≈ 235.6 µs
	DefaultDecodeStep       = 15 * time.Millisecond
	DefaultDecodeStepPerSeq = 500 * time.Microsecond
	DefaultContextWindow    = 32768
	DefaultModelName        = "sim"
)

// Scheduler constants, after vLLM's defaults where it has one.
const (
	// chunkTokens is the prefill token budget of one step (chunked
	// prefill): a long prompt is prefilled over several steps, and the
	// running sequences decode one token in each.
	chunkTokens = 512
	// blockTokens is the size of a KV-cache block.
	blockTokens = 16
)

// DefaultKVCacheTokens is the default of [Config.KVCacheTokens]: 1 Mi
// tokens, more than any test's running batch needs, so the cache only
// evicts blocks no sequence holds.
const DefaultKVCacheTokens = 1 << 20

// Fault is a failure the [Server] injects into every chat-completion
// request, to test clients. The zero value injects none.
type Fault string

// The faults.
const (
	FaultNone Fault = ""
	// FaultRateLimited answers 429 with "Retry-After: 1" (or
	// Config.RetryAfter).
	FaultRateLimited Fault = "rate_limited"
	// FaultOverloaded answers 503, with a Retry-After only when
	// Config.RetryAfter is set.
	FaultOverloaded Fault = "overloaded"
	// FaultServerError answers 500.
	FaultServerError Fault = "server_error"
	// FaultBadRequest answers 400 with an invalid_request_error.
	FaultBadRequest Fault = "bad_request"
	// FaultStreamCut closes the connection without the response's end: a
	// stream after its first token, a plain answer half-way through its
	// body.
	FaultStreamCut Fault = "stream_cut"
	// FaultMalformed answers 200 with truncated JSON: the body, or, in a
	// stream, the data line after the first token's.
	FaultMalformed Fault = "malformed"
)

// Faults lists the faults a [Config] accepts, besides FaultNone.
var Faults = []Fault{FaultRateLimited, FaultOverloaded, FaultServerError, FaultBadRequest, FaultStreamCut, FaultMalformed}

// ErrServerStarted is returned by [Server.Run] when Run was called before:
// a server runs once.
var ErrServerStarted = errors.New("simhttp: server already started")

// Config configures a [Server]. The zero value is valid: a server
// with the calibrated defaults, prefix caching on, no API key and no
// faults.
type Config struct {
	// Model sets the content of the answers: tool turns, tools, seed,
	// invalid, corruption (of packed answers) and failure rates (a
	// failure answers 503). Its Latency,
	// PerToken and Jitter are ignored: the server's timing model applies.
	Model sim.Config
	// ModelName is the model the server lists and answers as when a
	// request names none. Defaults to DefaultModelName.
	ModelName string
	// MaxSeqs is the number of sequences in the running batch. Defaults
	// to DefaultMaxSeqs.
	MaxSeqs int
	// MaxQueue is the number of requests that may wait for a sequence
	// slot; beyond it the server answers 429 with "Retry-After: 1".
	// Defaults to DefaultMaxQueue; negative means unbounded.
	MaxQueue int
	// PrefillPerToken is the prefill time of one uncached prompt token.
	// Defaults to DefaultPrefillPerToken.
	PrefillPerToken time.Duration
	// DecodeStep is the time of a decode step with a batch of one.
	// Defaults to DefaultDecodeStep.
	DecodeStep time.Duration
	// DecodeStepPerSeq is the extra time of a step per sequence in the
	// batch. Defaults to DefaultDecodeStepPerSeq.
	DecodeStepPerSeq time.Duration
	// CallOverhead is the time a request costs the server before its
	// prefill, as a local server spends per call on templating, sampler
	// and slot setup: it is added to the step in which the request's
	// prefill starts, so the whole batch waits for it (on a server of one
	// sequence, calls pay it one after the other). Zero means none.
	CallOverhead time.Duration
	// NoPrefixCache turns the prefix cache off: every prompt token is
	// prefilled, and the KV cache is not modelled. The zero value caches.
	NoPrefixCache bool
	// KVCacheTokens is the size of the KV cache in tokens, rounded down to
	// whole blocks of 16 tokens. A running sequence holds room for its
	// prompt and completion; a request is admitted only when there is room
	// for it, evicting the least recently used prefix blocks no running
	// sequence holds; one that could never fit is answered 400. Defaults
	// to DefaultKVCacheTokens. Set with NoPrefixCache it is an error.
	KVCacheTokens int
	// ContextWindow is the model's context in tokens: a longer prompt (or
	// prompt plus max_tokens) gets a 400 context_length_exceeded error.
	// Defaults to DefaultContextWindow.
	ContextWindow int
	// APIKey, when set, is the bearer token requests to /v1/ must carry;
	// others get 401. Empty means no authentication.
	APIKey string
	// Fault is injected into every chat-completion request that arrives
	// within the fault window (see FaultAfter and FaultFor). Zero means
	// none.
	Fault Fault
	// FaultAfter delays the fault window: Fault is injected only into
	// requests that arrive at least FaultAfter after New. Zero means
	// from the start.
	FaultAfter time.Duration
	// FaultFor is the length of the fault window: requests that arrive
	// FaultAfter+FaultFor or later after New are served normally
	// again. Zero means the window never ends.
	FaultFor time.Duration
	// RetryAfter is the wait the rate_limited and overloaded faults ask
	// for (Retry-After in whole seconds, rounded up, plus retry-after-ms
	// when it is not whole). Zero means 1s for rate_limited and no
	// Retry-After for overloaded.
	RetryAfter time.Duration
	// Logger receives a line per request at Debug level. Nil means no
	// logging.
	Logger *slog.Logger
	// RPM and TPM enforce an account's requests and tokens per minute as
	// a hosted API does (see [Server]'s rate limits): a request over
	// either is answered 429 with Retry-After, and every chat answer
	// carries OpenAI's x-ratelimit-* headers. Zero means no limit of that
	// kind.
	RPM, TPM int
	// Batch mounts OpenAI's Batch API (/v1/files and /v1/batches, see
	// package server/batchapi) whose lines the server answers as chat
	// completions, outside RPM and TPM, and serves its counts at GET
	// /sim/batch/stats ([BatchStats]). Its store is in a temporary
	// directory that [Server.Run] makes when it starts and removes when
	// it returns. The zero value mounts none.
	Batch bool
	// BatchDelay is the least time a batch takes from its creation to
	// its completion, as a provider's batch takes hours (see
	// batchapi.Config.Hold). Zero means none.
	BatchDelay time.Duration
}

func (c Config) withDefaults() Config {
	if c.ModelName == "" {
		c.ModelName = DefaultModelName
	}
	if c.MaxSeqs == 0 {
		c.MaxSeqs = DefaultMaxSeqs
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.PrefillPerToken == 0 {
		c.PrefillPerToken = DefaultPrefillPerToken
	}
	if c.DecodeStep == 0 {
		c.DecodeStep = DefaultDecodeStep
	}
	if c.DecodeStepPerSeq == 0 {
		c.DecodeStepPerSeq = DefaultDecodeStepPerSeq
	}
	if c.ContextWindow == 0 {
		c.ContextWindow = DefaultContextWindow
	}
	if c.KVCacheTokens == 0 {
		c.KVCacheTokens = DefaultKVCacheTokens
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// The server owns timing; the model only writes the answers.
	c.Model.Latency, c.Model.PerToken, c.Model.Jitter = 0, 0, 0
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MaxSeqs < 0 {
		errs = append(errs, fmt.Errorf("simhttp: max_seqs = %d, want > 0", c.MaxSeqs))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"prefill_per_token", c.PrefillPerToken}, {"decode_step", c.DecodeStep}, {"decode_step_per_seq", c.DecodeStepPerSeq}, {"call_overhead", c.CallOverhead}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("simhttp: %s = %v, want a duration >= 0", d.name, d.v))
		}
	}
	if c.BatchDelay < 0 {
		errs = append(errs, fmt.Errorf("simhttp: batch_delay = %v, want a duration >= 0", c.BatchDelay))
	}
	if c.ContextWindow < 0 {
		errs = append(errs, fmt.Errorf("simhttp: context_window = %d, want > 0", c.ContextWindow))
	}
	switch {
	case c.KVCacheTokens < 0 || c.KVCacheTokens > 0 && c.KVCacheTokens < blockTokens:
		errs = append(errs, fmt.Errorf("simhttp: kv_cache_tokens = %d, want at least one block (%d tokens)", c.KVCacheTokens, blockTokens))
	case c.KVCacheTokens > 0 && c.NoPrefixCache:
		errs = append(errs, errors.New("simhttp: kv_cache_tokens is set but the prefix cache is off (no_prefix_cache)"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"fault_after", c.FaultAfter}, {"fault_for", c.FaultFor}, {"retry_after", c.RetryAfter}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("simhttp: %s = %v, want a duration >= 0", d.name, d.v))
		}
	}
	if c.RPM < 0 || c.TPM < 0 {
		errs = append(errs, fmt.Errorf("simhttp: rpm = %d, tpm = %d, want >= 0 (0: no limit)", c.RPM, c.TPM))
	}
	if c.Fault != FaultNone && !slices.Contains(Faults, c.Fault) {
		names := make([]string, len(Faults))
		for i, f := range Faults {
			names[i] = string(f)
		}
		errs = append(errs, fmt.Errorf("simhttp: unknown fault %q (known: %s)", c.Fault, strings.Join(names, ", ")))
	}
	return errors.Join(errs...)
}

// Server is the simulator served as an OpenAI-compatible chat-completions
// server whose timing models a continuous-batching GPU server such as
// vLLM. It serves POST /v1/chat/completions (plain and streamed),
// GET /v1/models, GET /metrics (Prometheus text with vLLM's metric names)
// and GET /health.
//
// # Timing model
//
// One scheduler loop ([Server.Run]) owns the simulated GPU and runs steps,
// one after the other. Timing depends only on the order in which requests
// arrive, so it is deterministic, and exact under testing/synctest.
//
// Admission: a request waits in a FIFO queue until one of MaxSeqs sequence
// slots is free; slots are filled at the start of each step. A request
// that finds MaxQueue requests waiting is answered 429 at once.
//
// Prefill: prompts are prefilled one at a time, in admission order, in
// chunks: each step prefills up to 512 tokens, finishing one prompt and
// starting the next within the budget, so running sequences keep decoding
// during a long prefill (vLLM's chunked prefill). A prompt's cost is its
// uncached tokens × PrefillPerToken, plus CallOverhead once, added to
// the step in which its prefill starts.
//
// Prefix cache: a prompt is rendered (system messages, the tools' JSON,
// then the other messages, in order) and counted as one token per 4 bytes,
// rounded up. Its full blocks of 16 tokens are identified by chained
// hashes, as in vLLM's automatic prefix caching. When a prompt's prefill
// starts, its cached tokens are the longest run of its leading blocks
// already in the cache (at most all tokens but one); the rest are
// prefilled. A prompt's blocks enter the cache when its prefill finishes,
// so a prefix becomes reusable only once its first prefill is done.
//
// KV cache: the cache holds KVCacheTokens tokens in blocks of 16. A
// sequence is admitted only when there is room for its prompt and its
// completion: it holds its prompt's cached blocks and reserves the rest,
// evicting the least recently used blocks that no running sequence holds
// (a prefix is evicted from its end). A running sequence's blocks are
// never evicted; when the running batch leaves no room, the queue waits.
// A finished sequence's prompt blocks stay cached until evicted; a later
// prompt that prefills a block evicted before counts as recomputed
// ([Stats.RecomputedTokens]).
//
// Decode: in each step every sequence whose prefill is done emits one
// token, and a sequence whose prefill finishes in the step emits its first
// token. A step is one forward pass over a mixed batch: it takes the
// longer of its memory-bound time, DecodeStep + DecodeStepPerSeq × the
// sequences in the batch, and its compute-bound time, PrefillPerToken ×
// its tokens (the prefill chunk plus one per decoding sequence). A
// sequence finishes after its completion tokens (the simulated answer's
// bytes / 4, capped by max_tokens) and frees its slot.
//
// So a request's time to first token (TTFT) is its queue wait plus the
// steps until its prefill is done, the first token's included. With the
// defaults, 50 uncached 2,547-token prompts sent at once get their first
// tokens 0.6 s apart (the 50th after about 30 s, as measured on vLLM),
// while with a 2,047-token prefix already cached each further prompt adds
// only its ~20 uncached tokens (about 5 ms), and 100 such requests with
// 4-token answers see a TTFT p50 of about 0.5 s, set by how fast the 16
// slots turn over.
//
// A client that goes away leaves the queue or the batch at once (its slot
// is free at the next step).
//
// # Rate limits
//
// With Config.RPM or TPM set, the server enforces them as OpenAI does:
// each is a bucket holding a minute's budget that starts full and refills
// evenly. A request takes one request and its tokens (prompt and
// completion, both known when it arrives); one that finds a bucket short
// is answered 429 (type "requests" or "tokens") with Retry-After and
// retry-after-ms set to the wait until it would fit, and counted in
// [Stats.RateLimited]. Every chat answer, 429s included, carries
// x-ratelimit-limit-, x-ratelimit-remaining- and x-ratelimit-reset-
// requests and tokens: the buckets after the request, the resets as Go
// durations to the millisecond ("6m0s", "20ms").
//
// Server is safe for concurrent use. Requests that arrive before Run
// starts wait for it; once Run has returned, they are answered 503, and
// /health answers 200 only while Run runs.
type Server struct {
	cfg   Config // cfg.Logger is never nil
	model *sim.Model
	start time.Time // when New made it: the fault window's origin

	ids atomic.Uint64 // request IDs

	acct *account // the rate limits; nil: none

	// batchReady is closed by Run once batch is set (nil without
	// Config.Batch); batch is the Batch API, nil if its store could not
	// be opened. Both are read without mu after batchReady is closed.
	batchReady chan struct{}
	batch      *batchMode

	mu      sync.Mutex // protects phase, queue, waiting and seq.state
	phase   phase
	queue   []*seq // FIFO of sequences waiting for a slot; left ones are skipped
	waiting int    // sequences in queue that did not leave

	// wake tells the idle scheduler that a request arrived (capacity 1:
	// one pending signal is enough).
	wake chan struct{}

	// cache is owned by the Run goroutine; nil without a prefix cache.
	cache *kvCache

	requests  atomic.Int64
	rejected  atomic.Int64
	limited   atomic.Int64
	prompt    atomic.Int64
	cached    atomic.Int64
	generated atomic.Int64
	running   atomic.Int64

	prefilled  atomic.Int64 // prompt tokens computed
	recomputed atomic.Int64 // of them, in blocks evicted before
	lost       atomic.Int64 // sequences that recomputed evicted blocks
	busy       atomic.Int64 // ns of steps run
	service    atomic.Int64 // ns of steps × sequences taking part

	sizesMu sync.Mutex    // protects sizes
	sizes   map[int]int64 // requests admitted to the queue, by tasks a request (1: not packed)
}

// phase is where a Server is in its life.
type phase uint8

const (
	phaseNew     phase = iota // Run not called yet: requests queue
	phaseRunning              // Run runs
	phaseStopped              // Run returned: requests get 503
)

// New returns a server for cfg. It returns an error when cfg is out
// of range (negative sizes or durations, rates outside [0, 1], an unknown
// fault).
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := sim.New(cfg.Model)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, model: m, start: time.Now(), wake: make(chan struct{}, 1), sizes: map[int]int64{}}
	s.acct = newAccount(cfg.RPM, cfg.TPM, s.start)
	if !cfg.NoPrefixCache {
		s.cache = newKVCache(cfg.KVCacheTokens / blockTokens)
	}
	if cfg.Batch {
		s.batchReady = make(chan struct{})
	}
	return s, nil
}

// Stats counts a [Server]'s work.
type Stats struct {
	// Requests counts the chat-completion requests received (past
	// authentication).
	Requests int64
	// Rejected counts the requests answered 429 because the queue was
	// full.
	Rejected int64
	// RateLimited counts the requests answered 429 because they were over
	// Config.RPM or TPM.
	RateLimited int64
	// PromptTokens counts the prompt tokens of the requests whose prefill
	// started.
	PromptTokens int64
	// CachedTokens is the part of PromptTokens served from the prefix
	// cache.
	CachedTokens int64
	// GenerationTokens counts the tokens generated.
	GenerationTokens int64
	// PrefillTokens counts the prompt tokens prefilled (computed): the
	// uncached part of PromptTokens.
	PrefillTokens int64
	// RecomputedTokens is the part of PrefillTokens in blocks that had
	// been cached and were evicted since.
	RecomputedTokens int64
	// LostPrefixes counts the requests that recomputed evicted blocks:
	// their prefix had been cached and was lost.
	LostPrefixes int64
	// Evictions counts the KV-cache blocks evicted.
	Evictions int64
	// BusyTime is the total time of the steps run: the simulated GPU's
	// busy time.
	BusyTime time.Duration
	// ServiceTime is each sequence's prefill and decode time summed: the
	// time of every step a sequence took part in, counted once per
	// sequence. ServiceTime / MaxSeqs is a lower bound of BusyTime.
	ServiceTime time.Duration
	// Running is the number of sequences in the running batch.
	Running int
	// Waiting is the number of requests waiting for a slot.
	Waiting int
}

// BatchStats returns the counts of the Batch API (Config.Batch); zero
// without one.
func (s *Server) BatchStats() BatchStats {
	if s.batchReady == nil {
		return BatchStats{}
	}
	select {
	case <-s.batchReady:
	default:
		return BatchStats{} // Run has not started
	}
	if s.batch == nil {
		return BatchStats{}
	}
	return s.batch.stats()
}

// PackSizes counts the chat-completion requests the server queued (past
// rate limits and faults) by the number of tasks each carried: a packed
// request (see package internal/pack) counts under its tasks
// ([sim.PackSize]), any other under 1. It returns a fresh map; it is
// safe to call at any time.
func (s *Server) PackSizes() map[int]int64 {
	s.sizesMu.Lock()
	defer s.sizesMu.Unlock()
	return maps.Clone(s.sizes)
}

// ModelStats returns the simulated model's counts: its answers, packed
// ones, and their corrupted and biased entries.
func (s *Server) ModelStats() sim.Stats { return s.model.Stats() }

// Stats returns the server's counters and gauges. It is safe to call at
// any time.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	waiting := s.waiting
	s.mu.Unlock()
	var evictions int64
	if s.cache != nil {
		evictions = s.cache.evictions.Load()
	}
	return Stats{
		Evictions:        evictions,
		Requests:         s.requests.Load(),
		Rejected:         s.rejected.Load(),
		RateLimited:      s.limited.Load(),
		PromptTokens:     s.prompt.Load(),
		CachedTokens:     s.cached.Load(),
		GenerationTokens: s.generated.Load(),
		PrefillTokens:    s.prefilled.Load(),
		RecomputedTokens: s.recomputed.Load(),
		LostPrefixes:     s.lost.Load(),
		BusyTime:         time.Duration(s.busy.Load()),
		ServiceTime:      time.Duration(s.service.Load()),
		Running:          int(s.running.Load()),
		Waiting:          waiting,
	}
}

// ServeHTTP serves the OpenAI-compatible API, /metrics and /health. Errors
// are OpenAI's JSON error bodies ({"error":{"message","type","code"}}).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case path == "/health":
		if !get {
			writeError(w, errMethod)
			return
		}
		s.mu.Lock()
		ph := s.phase
		s.mu.Unlock()
		if ph != phaseRunning {
			writeError(w, errNotRunning)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	case path == "/metrics":
		if !get {
			writeError(w, errMethod)
			return
		}
		s.writeMetrics(w)
	case path == "/sim/batch/stats" && s.cfg.Batch:
		if !get {
			writeError(w, errMethod)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.BatchStats())
	case strings.HasPrefix(path, "/v1/"):
		if !s.authorized(r) {
			writeError(w, errAuth)
			return
		}
		if s.cfg.Batch && isBatchPath(path) {
			s.serveBatch(w, r)
			return
		}
		switch path {
		case "/v1/chat/completions":
			if r.Method != http.MethodPost {
				writeError(w, errMethod)
				return
			}
			s.chat(w, r)
		case "/v1/embeddings", "/v1/completions":
			if r.Method != http.MethodPost {
				writeError(w, errMethod)
				return
			}
			s.forward(w, r)
		case "/v1/models":
			if !get {
				writeError(w, errMethod)
				return
			}
			s.writeModels(w)
		default:
			writeError(w, errNotFound)
		}
	default:
		writeError(w, errNotFound)
	}
}

// fault returns the fault to inject into a request that arrives at now:
// the configured one inside its window, else none.
func (s *Server) fault(now time.Time) Fault {
	since := now.Sub(s.start)
	if since < s.cfg.FaultAfter || s.cfg.FaultFor > 0 && since >= s.cfg.FaultAfter+s.cfg.FaultFor {
		return FaultNone
	}
	return s.cfg.Fault
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && key == s.cfg.APIKey
}

func (s *Server) writeModels(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[{"id":%s,"object":"model","created":0,"owned_by":"batchagent","max_model_len":%d}]}`+"\n",
		gen.AppendJSONString(nil, s.cfg.ModelName), s.cfg.ContextWindow)
}

// writeMetrics writes the Prometheus text exposition, with vLLM's names.
func (s *Server) writeMetrics(w http.ResponseWriter) {
	st := s.Stats()
	label := `{model_name=` + string(gen.AppendJSONString(nil, s.cfg.ModelName)) + `}`
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	for _, m := range []struct {
		name, typ, help string
		v               int64
	}{
		{"vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", int64(st.Running)},
		{"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", int64(st.Waiting)},
		{"vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", st.PromptTokens},
		{"vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", st.GenerationTokens},
		{"vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", st.PromptTokens},
		{"vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", st.CachedTokens},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s%s %d\n", m.name, m.help, m.name, m.typ, m.name, label, m.v)
	}
	for _, m := range []struct {
		name, help string
		v          int64
	}{
		{"batchagent_sim_prefill_tokens_total", "Prompt tokens prefilled (not served from the prefix cache).", st.PrefillTokens},
		{"batchagent_sim_recomputed_tokens_total", "Prompt tokens prefilled again after their KV-cache blocks were evicted.", st.RecomputedTokens},
		{"batchagent_sim_lost_prefixes_total", "Requests whose cached prefix had been evicted.", st.LostPrefixes},
		{"batchagent_sim_kv_evictions_total", "KV-cache blocks evicted.", st.Evictions},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", m.name, m.help, m.name, m.name, m.v)
	}
	fmt.Fprintf(w, "# HELP batchagent_sim_busy_seconds_total Time the simulated GPU ran steps.\n"+
		"# TYPE batchagent_sim_busy_seconds_total counter\nbatchagent_sim_busy_seconds_total %g\n", st.BusyTime.Seconds())
	fmt.Fprintf(w, "# HELP batchagent_sim_rejected_total Requests answered 429 because the queue was full.\n"+
		"# TYPE batchagent_sim_rejected_total counter\nbatchagent_sim_rejected_total %d\n", st.Rejected)
}

// forward answers POST /v1/embeddings and /v1/completions with the
// simulated model's [sim.Model.Forward].
func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		writeError(w, badRequest("reading the body: %v", err))
		return
	}
	resp, err := s.model.Forward(r.Context(), r.URL.Path, body)
	if err != nil {
		e := badRequest("%v", err)
		if ae, ok := errors.AsType[*llm.APIError](err); ok {
			e = badRequest("%s", ae.Message)
			if ae.StatusCode >= 500 {
				e = faultErrors[FaultOverloaded]
			}
		}
		writeError(w, e)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
