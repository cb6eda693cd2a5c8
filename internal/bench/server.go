package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// The server scenario: single-turn agents sharing a ~2,000-token system
// prompt, against the simulator served over HTTP as a capacity-limited
// continuous-batching server, through the real OpenAI backend.
const (
	serverSeqs  = 16 // sequences the server runs at once
	serverQueue = 32 // requests it queues before answering 429
	serverTask  = "Summarise item {id} of the catalogue."
)

// serverSystem is the shared prefix: about 2,000 tokens (8,000 bytes).
var serverSystem = rulesPrompt("You are a meticulous cataloguer. Follow the house rules below exactly.\n",
	"describe the item plainly, cite its identifier, and never guess a value you were not given.", 8000)

// rulesPrompt is a system prompt of at least size bytes: intro, then
// numbered lines "Rule N: rule" until it is long enough.
func rulesPrompt(intro, rule string, size int) string {
	var b strings.Builder
	b.WriteString(intro)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "Rule %d: %s\n", i+1, rule)
	}
	return b.String()
}

// serverRun is one mode's measurements.
type serverRun struct {
	tally
	ttfts       []time.Duration
	prompt      int64
	cached      int64
	rejected    int64
	serverCalls int64
}

// runServer runs one mode against a fresh server (cold prefix cache).
func runServer(ctx context.Context, wl workload, mode string) (serverRun, time.Duration, error) {
	srv, m, stop, err := serveSim(ctx, simhttp.Config{
		Model:    sim.Config{ToolTurns: -1, Seed: wl.seed},
		MaxSeqs:  serverSeqs,
		MaxQueue: serverQueue,
	})
	if err != nil {
		return serverRun{}, 0, err
	}
	defer stop()
	start := time.Now()
	var r serverRun
	if mode == "engine" {
		r, err = serverEngine(ctx, m, wl)
	} else {
		r, err = serverNaive(ctx, m, wl)
	}
	wall := time.Since(start)
	st := srv.Stats()
	r.rejected = st.Rejected
	r.serverCalls = st.Requests
	return r, wall, err
}

func serverEngine(ctx context.Context, m *openai.Model, wl workload) (serverRun, error) {
	var r serverRun
	cfg := batchagent.Config{MaxActive: wl.n, Admission: batchagent.Admission{WarmPrefix: true}}
	_, err := stream(ctx, cfg, batchagent.Def{
		ID:           "server",
		Model:        m,
		System:       serverSystem,
		Task:         serverTask,
		OutputSchema: json.RawMessage(outSchema),
		MaxRetries:   10,
	}, batchagent.Slice(ids(wl.n)), func(res batchagent.Result) error {
		r.count(res)
		r.ttfts = append(r.ttfts, res.Timings.TTFT)
		r.prompt += res.Usage.PromptTokens
		r.cached += res.Usage.CachedTokens
		return nil
	})
	if err != nil {
		return serverRun{}, err
	}
	return r, ctx.Err()
}

// serverNaive is the straightforward client: every request sent at once,
// streamed, retried after a fixed 1s pause when refused.
func serverNaive(ctx context.Context, m *openai.Model, wl workload) (serverRun, error) {
	sch, err := schema.Compile(json.RawMessage(outSchema))
	if err != nil {
		return serverRun{}, err
	}
	system := serverSystem + "\n\n" + sch.Instructions()
	var (
		mu sync.Mutex // protects r
		r  serverRun
	)
	outer := ctx
	g, ctx := errgroup.WithContext(ctx)
	for i := range wl.n {
		g.Go(func() error {
			res := batchagent.Result{Index: i}
			req := &llm.Request{
				Messages: []llm.Message{
					{Role: llm.RoleSystem, Content: system},
					{Role: llm.RoleUser, Content: strings.ReplaceAll(serverTask, "{id}", fmt.Sprint(i))},
				},
				Output: &llm.OutputSpec{Name: "output", Schema: sch.Raw()},
			}
			ttft := naiveCall(ctx, m, req, sch, 10, time.Second, &res)
			mu.Lock()
			defer mu.Unlock()
			r.count(res)
			r.ttfts = append(r.ttfts, ttft)
			r.prompt += res.Usage.PromptTokens
			r.cached += res.Usage.CachedTokens
			return nil
		})
	}
	err = g.Wait()
	return r, errors.Join(err, outer.Err())
}

func ids(n int) []batchagent.Input {
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"id": fmt.Sprint(i)}
	}
	return in
}

// cacheStats returns the 50th and 95th percentiles of ttfts in seconds and
// the share of prompt tokens that were cached, as a Report carries them.
func cacheStats(ttfts []time.Duration, prompt, cached int64) (p50, p95, share float64) {
	p50 = round(percentile(ttfts, 0.50).Seconds(), 4)
	p95 = round(percentile(ttfts, 0.95).Seconds(), 4)
	if prompt > 0 {
		share = round(float64(cached)/float64(prompt), 4)
	}
	return p50, p95, share
}

// percentile returns the p-th percentile (0..1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

// serveSim serves the HTTP simulator of cfg on a loopback port until stop
// is called, and returns it with the OpenAI backend that calls it.
func serveSim(ctx context.Context, cfg simhttp.Config) (_ *simhttp.Server, _ *openai.Model, stop func(), err error) {
	srv, err := simhttp.New(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bench: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	stop = func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	}
	ocfg, err := openai.ParseURL("sim+http://" + ln.Addr().String())
	if err == nil {
		var m *openai.Model
		if m, err = openai.New(ocfg); err == nil {
			return srv, m, stop, nil
		}
	}
	stop()
	return nil, nil, nil, err
}
