package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// The live scenario: single-turn agents against a real OpenAI-compatible
// server named by URL, through the real OpenAI backend, in both modes.
// Every agent shares a system prompt (a prefix the server may cache) and
// names its item in one short word: a schema even a tiny model satisfies,
// and whose maxLength keeps a grammar-constrained answer from running on.
const (
	liveTask   = "Name item {id} in one short word."
	liveSchema = `{"type":"object","properties":{"word":{"type":"string","minLength":1,"maxLength":12}},"required":["word"],"additionalProperties":false}`
	// DefaultLiveN is the live scenario's default number of agents.
	DefaultLiveN = 48
	// DefaultLiveMaxTokens caps each answer of the live scenario: the
	// answer is a dozen tokens, and a server's own default may be no cap
	// at all (Ollama's num_predict -1 lets a tiny model talk forever).
	DefaultLiveMaxTokens = 96
	// liveSoloRuns is how many times one agent runs alone, after a warm-up
	// run, to measure ideal_s: the shortest of them.
	liveSoloRuns = 3
	// liveRetryPause is the naive client's fixed pause before retrying a
	// transient failure.
	liveRetryPause = time.Second
)

// liveSystem is the shared prefix, about 250 tokens.
var liveSystem = rulesPrompt("You are a careful cataloguer of a toy shop. Follow the house rules below.\n",
	"answer with one short word and nothing else.", 1000)

// liveRun is one mode's measurements.
type liveRun struct {
	tally
	ttfts               []time.Duration // of agents that received a token
	prompt, cached      int64
	completion          int64
	valid               int // agents whose final answer parsed and validated
	requests, status429 int64
}

// countingTransport counts the HTTP requests it sends and the 429 answers
// they receive. It is safe for concurrent use.
type countingTransport struct {
	base      *http.Transport
	requests  atomic.Int64
	status429 atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		t.status429.Add(1)
	}
	return resp, err
}

// liveBackend is a fresh OpenAI-backend client for one mode, with its own
// connections and counters.
type liveBackend struct {
	model *openai.Model
	tr    *countingTransport
}

func newLiveBackend(opt Options) (*liveBackend, error) {
	cfg, err := openai.ParseURL(opt.Backend)
	if err != nil {
		return nil, fmt.Errorf("bench live: --backend: %w", err)
	}
	cfg.APIKey = opt.APIKey
	if cfg.Model == "" {
		cfg.Model = opt.Model
	}
	// The transport the backend would build for itself, counted.
	tr := &countingTransport{base: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: openai.DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256, // every agent of a mode may hold one
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   openai.DefaultTLSHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: openai.DefaultResponseHeaderTimeout,
	}}
	cfg.HTTPClient = &http.Client{Transport: tr}
	m, err := openai.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench live: %w", err)
	}
	return &liveBackend{model: m, tr: tr}, nil
}

func (b *liveBackend) close() { b.tr.base.CloseIdleConnections() }

// backendName names a backend URL by scheme and host alone: its path or
// query may hold a secret.
func backendName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the backend"
	}
	return u.Scheme + "://" + u.Host
}

// runLive runs the live scenario: first one agent alone (a warm-up run,
// which may load the model, then liveSoloRuns measured runs whose shortest
// wall time is ideal_s), then every mode, Count times in rounds.
func runLive(ctx context.Context, opt Options, w io.Writer) ([]Report, error) {
	if opt.Backend == "" {
		return nil, errors.New("bench live: --backend URL is required (an OpenAI-compatible server: openai+http://HOST:PORT/v1, ollama://HOST:PORT, vllm://...)")
	}
	if opt.Fail != 0 || opt.State || opt.Dir != "" {
		return nil, errors.New("bench live: --fail, --state and --dir do not apply: the server is real and no files are written")
	}
	if opt.MaxTokens < 0 {
		return nil, fmt.Errorf("bench live: --max-tokens %d is negative", opt.MaxTokens)
	}
	lw := liveWorkload{n: DefaultLiveN, maxTokens: opt.MaxTokens}
	if opt.N > 0 {
		lw.n = opt.N
	}
	if lw.maxTokens == 0 {
		lw.maxTokens = DefaultLiveMaxTokens
	}
	modes := opt.Modes
	if len(modes) == 0 {
		modes = []string{"engine", "naive"}
	}
	for _, m := range modes {
		if m != "engine" && m != "naive" {
			return nil, fmt.Errorf("bench live: unknown mode %q (known: engine, naive)", m)
		}
	}
	sch, err := schema.Compile(json.RawMessage(liveSchema))
	if err != nil {
		return nil, err
	}
	lw.schema = sch
	lw.system = liveSystem + "\n\n" + sch.Instructions()
	if lw.task, err = job.ParseTemplate(liveTask); err != nil {
		return nil, err
	}

	ideal, err := liveIdeal(ctx, opt, lw)
	if err != nil {
		return nil, err
	}
	if !opt.JSON {
		fmt.Fprintln(w, tableHeader)
	}
	count := max(opt.Count, 1)
	runs := make(map[string][]Report, len(modes))
	for range count {
		for _, mode := range modes {
			rep, err := measureLive(ctx, opt, lw, mode, ideal)
			if err != nil {
				return nil, err
			}
			runs[mode] = append(runs[mode], rep)
		}
	}
	var reports []Report
	for _, mode := range modes {
		rep := median(runs[mode])
		if count > 1 {
			rep.Runs = count
		}
		reports = append(reports, rep)
		if opt.JSON {
			b, err := json.Marshal(rep)
			if err != nil {
				return reports, err
			}
			fmt.Fprintln(w, string(b))
		} else {
			fmt.Fprintln(w, tableRow(rep)+liveColumns(rep))
		}
	}
	return reports, nil
}

// liveWorkload is what every mode of the live scenario runs.
type liveWorkload struct {
	n         int
	maxTokens int
	schema    *schema.Schema
	task      *job.Template
	system    string // the naive client's system prompt: liveSystem and schema's instructions
}

// liveIdeal measures the physical limit: one agent alone on the server,
// the naive client calling the model directly, nothing waiting for
// anything else. The first run is a warm-up (it may load the model); the
// shortest of the next liveSoloRuns is the critical path. A run that
// cannot reach the server stops the scenario before any mode runs.
func liveIdeal(ctx context.Context, opt Options, lw liveWorkload) (time.Duration, error) {
	b, err := newLiveBackend(opt)
	if err != nil {
		return 0, err
	}
	defer b.close()
	best := time.Duration(math.MaxInt64)
	for i := range liveSoloRuns + 1 {
		start := time.Now()
		res, _ := naiveLiveAgent(ctx, b.model, lw, 0)
		wall := time.Since(start)
		if res.Err != nil && !errors.As(res.Err, new(*schema.ValidationError)) {
			// Not an answer the schema refused: the server itself failed.
			return 0, fmt.Errorf("bench live: one agent alone against %s: %w", backendName(opt.Backend), res.Err)
		}
		if i > 0 {
			best = min(best, wall)
		}
	}
	return best, nil
}

// measureLive runs one mode of the live scenario with a fresh client.
func measureLive(ctx context.Context, opt Options, lw liveWorkload, mode string, ideal time.Duration) (Report, error) {
	b, err := newLiveBackend(opt)
	if err != nil {
		return Report{}, err
	}
	defer b.close()
	debug.FreeOSMemory()
	resetPeakRSS()
	cpu0 := cpuTime()
	start := time.Now()
	var r liveRun
	if mode == "engine" {
		r, err = liveEngine(ctx, b.model, lw)
	} else {
		r, err = liveNaive(ctx, b.model, lw)
	}
	wall := time.Since(start)
	if err != nil {
		return Report{}, fmt.Errorf("bench live %s: %w", mode, err)
	}
	r.requests, r.status429 = b.tr.requests.Load(), b.tr.status429.Load()
	p50, p95, share := cacheStats(r.ttfts, r.prompt, r.cached)
	tokensPerS := round(float64(r.completion)/wall.Seconds(), 2)
	validShare := round(float64(r.valid)/float64(lw.n), 4)
	return Report{
		Scenario:         "live",
		Mode:             mode,
		N:                lw.n,
		WallS:            round(wall.Seconds(), 4),
		IdealS:           round(ideal.Seconds(), 4),
		Ratio:            round(wall.Seconds()/ideal.Seconds(), 3),
		AgentsPerS:       round(float64(lw.n)/wall.Seconds(), 2),
		OK:               r.ok,
		Failed:           r.failed,
		LLMCalls:         r.llmCalls,
		PeakRSSMB:        round(peakRSSMB(), 1),
		CPUS:             round((cpuTime() - cpu0).Seconds(), 3),
		MaxRetried:       r.maxRetried,
		TTFTP50S:         &p50,
		TTFTP95S:         &p95,
		CachedShare:      &share,
		HTTP429:          &r.status429,
		ServerRequests:   r.requests,
		PromptTokens:     r.prompt,
		CompletionTokens: r.completion,
		MaxTokens:        lw.maxTokens,
		TokensPerS:       &tokensPerS,
		SchemaValidShare: &validShare,
	}, nil
}

// liveColumns are the table's extra columns for the live scenario.
func liveColumns(r Report) string {
	return fmt.Sprintf("  ttft_p50 %.3f  ttft_p95 %.3f  cached %.2f  http_429 %d  tokens/s %.1f  valid %.2f",
		*r.TTFTP50S, *r.TTFTP95S, *r.CachedShare, *r.HTTP429, *r.TokensPerS, *r.SchemaValidShare)
}

// liveEngine runs the workload through the engine with its defaults for
// the backend (the flavor's concurrency, adapted by AIMD; retries and
// corrections as the engine does them) and WarmPrefix, as a job sharing a
// long system prompt would set it: the first call goes alone so that the
// server's prefix cache holds the prefix before the others arrive.
func liveEngine(ctx context.Context, m *openai.Model, lw liveWorkload) (liveRun, error) {
	var r liveRun
	cfg := batchagent.Config{MaxActive: lw.n, Admission: batchagent.Admission{WarmPrefix: true}}
	_, err := stream(ctx, cfg, batchagent.Def{
		ID:           "live",
		Model:        m,
		System:       liveSystem,
		Task:         liveTask,
		OutputSchema: json.RawMessage(liveSchema),
		MaxTokens:    lw.maxTokens,
	}, batchagent.Slice(ids(lw.n)), func(res batchagent.Result) error {
		r.add(res, res.Timings.TTFT)
		return nil
	})
	if err != nil {
		return liveRun{}, err
	}
	return r, ctx.Err()
}

func (r *liveRun) add(res batchagent.Result, ttft time.Duration) {
	r.count(res)
	if res.Err == nil && res.Output != nil {
		r.valid++
	}
	if ttft > 0 {
		r.ttfts = append(r.ttfts, ttft)
	}
	r.prompt += res.Usage.PromptTokens
	r.cached += res.Usage.CachedTokens
	r.completion += res.Usage.CompletionTokens
}

// liveNaive is the straightforward Go client: one goroutine per input in an
// errgroup, every request sent at once and streamed, the answer validated
// once (no correction turn), a transient failure retried after a fixed
// pause, as many times as the engine would retry it.
func liveNaive(ctx context.Context, m *openai.Model, lw liveWorkload) (liveRun, error) {
	var (
		mu sync.Mutex // protects r
		r  liveRun
	)
	var g errgroup.Group
	for i := range lw.n {
		g.Go(func() error {
			res, ttft := naiveLiveAgent(ctx, m, lw, i)
			mu.Lock()
			defer mu.Unlock()
			r.add(res, ttft)
			return nil
		})
	}
	err := g.Wait()
	return r, errors.Join(err, ctx.Err())
}

// naiveLiveAgent runs agent i of the live workload with the naive client
// and returns its result and its time to first token (zero when no token
// came).
func naiveLiveAgent(ctx context.Context, m *openai.Model, lw liveWorkload, i int) (batchagent.Result, time.Duration) {
	input := batchagent.Input{"id": fmt.Sprint(i)}
	res := batchagent.Result{Index: i, Input: input}
	text, err := lw.task.Render(input)
	if err != nil {
		res.Err = err
		return res, 0
	}
	req := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: lw.system},
			{Role: llm.RoleUser, Content: text},
		},
		Output:    &llm.OutputSpec{Name: "output", Schema: lw.schema.Raw()},
		MaxTokens: lw.maxTokens,
	}
	ttft := naiveCall(ctx, m, req, lw.schema, batchagent.DefaultMaxRetries, liveRetryPause, &res)
	return res, ttft
}

// naiveCall is one naive agent's single turn: req streamed, the answer
// parsed by sch once (no correction turn), a transient failure retried
// after a fixed pause, up to maxRetries times. It sets res's ModelCalls,
// Turns, Usage, Raw, Output and Err, and returns the time from its start to
// the first token of the answer (zero when no token came).
func naiveCall(ctx context.Context, m *openai.Model, req *llm.Request, sch *schema.Schema, maxRetries int, pause time.Duration, res *batchagent.Result) time.Duration {
	ready := time.Now()
	for attempt := 0; ; attempt++ {
		res.ModelCalls++
		var (
			acc   llm.Accumulator
			first time.Time
			err   error
		)
		for ev, e := range m.Stream(ctx, req) {
			if e != nil {
				err = e
				break
			}
			if first.IsZero() {
				first = time.Now()
			}
			acc.Add(ev)
		}
		if err == nil {
			resp := acc.Response()
			res.Turns = 1
			res.Usage = resp.Usage
			res.Raw = resp.Message.Content
			res.Output, res.Err = sch.Parse(resp.Message.Content)
			if first.IsZero() {
				return 0
			}
			return first.Sub(ready)
		}
		if !llm.IsTransient(err) || attempt == maxRetries {
			res.Err = err
			return 0
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			res.Err = ctx.Err()
			return 0
		}
	}
}
