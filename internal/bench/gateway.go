package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/server"
)

// Defaults of the gateway scenario.
const (
	DefaultGatewayRate     = 1000
	DefaultGatewayDuration = 30 * time.Second
	// gatewayMaxOpen bounds the requests open at once in each phase: far
	// above what the rate needs at the simulator's speed, so that it only
	// matters when the system under test stalls.
	gatewayMaxOpen = 2048
)

// GatewayOptions configures the gateway scenario. The zero value runs the
// defaults.
type GatewayOptions struct {
	// Rate is the requests sent per second. Defaults to
	// DefaultGatewayRate.
	Rate int
	// Duration is how long each phase sends. Defaults to
	// DefaultGatewayDuration.
	Duration time.Duration
	// JSON prints the report as one JSON object instead of a line of text.
	JSON bool
}

// GatewayReport is the gateway scenario's result: the latency of a
// streamed chat completion sent at a sustained rate to the HTTP
// simulator directly, and through the gateway in front of it; "added" is
// the difference of each percentile. Latency runs from sending the
// request to reading the stream's end.
type GatewayReport struct {
	Scenario  string  `json:"scenario"`
	Rate      int     `json:"rate"`
	DurationS float64 `json:"duration_s"`
	// Requests is the requests each phase sent.
	Requests      int     `json:"requests"`
	DirectP50MS   float64 `json:"direct_p50_ms"`
	DirectP95MS   float64 `json:"direct_p95_ms"`
	DirectP99MS   float64 `json:"direct_p99_ms"`
	GatewayP50MS  float64 `json:"gateway_p50_ms"`
	GatewayP95MS  float64 `json:"gateway_p95_ms"`
	GatewayP99MS  float64 `json:"gateway_p99_ms"`
	AddedP50MS    float64 `json:"added_p50_ms"`
	AddedP95MS    float64 `json:"added_p95_ms"`
	AddedP99MS    float64 `json:"added_p99_ms"`
	DirectErrors  int     `json:"direct_errors"`
	GatewayErrors int     `json:"gateway_errors"`
	// Errors sums DirectErrors and GatewayErrors (BENCHMARKS.md's field).
	Errors int `json:"errors"`
	// AchievedRate is the gateway phase's requests over its wall time.
	AchievedRate float64 `json:"achieved_rate"`
}

// gatewayBody is the request of the scenario: a short streamed answer.
const gatewayBody = `{"model":"sim","stream":true,"stream_options":{"include_usage":true},"max_tokens":16,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello."}]}`

// RunGateway runs the gateway scenario: the HTTP simulator, made fast
// (so that its own time is small against the gateway's), on a loopback
// listener; a gateway (package server) in front of it through the
// openai backend; and, for each of the two, after a warm-up of both (a
// tenth of Duration, at least 0.5s), Rate streamed requests per second
// for Duration, open loop. It writes the report to w. The added latency
// is a difference of percentiles, so on a busy machine it can come out
// slightly negative.
func RunGateway(ctx context.Context, opt GatewayOptions, w io.Writer) (GatewayReport, error) {
	if opt.Rate < 0 || opt.Duration < 0 {
		return GatewayReport{}, errors.New("bench: gateway rate and duration must be positive")
	}
	if opt.Rate == 0 {
		opt.Rate = DefaultGatewayRate
	}
	if opt.Duration == 0 {
		opt.Duration = DefaultGatewayDuration
	}
	up, err := simhttp.New(simhttp.Config{
		Model:           sim.Config{Seed: 1, ToolTurns: -1},
		MaxSeqs:         1024,
		MaxQueue:        -1,
		PrefillPerToken: time.Nanosecond,
		DecodeStep:      10 * time.Microsecond, DecodeStepPerSeq: time.Nanosecond,
	})
	if err != nil {
		return GatewayReport{}, err
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1) // the simulator's Run
	go func() { ran <- up.Run(runCtx) }()
	defer func() { stopRun(); <-ran }()
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()

	model, err := openai.New(openai.Config{BaseURL: upSrv.URL + "/v1", Concurrency: gatewayMaxOpen})
	if err != nil {
		return GatewayReport{}, err
	}
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		return GatewayReport{}, err
	}
	gw, err := server.New(server.Config{Engine: engine, Backends: map[string]batchagent.Backend{"sim": {Model: model, Name: "sim"}}})
	if err != nil {
		return GatewayReport{}, err
	}
	gwSrv := httptest.NewServer(gw)
	defer gwSrv.Close()
	defer func() {
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(shut) // the report is what matters; requests are done
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: gatewayMaxOpen}}
	defer client.CloseIdleConnections()
	// Warm both paths up (connections, the simulator's prefix cache, the
	// gateway's adaptive limit) before measuring either.
	warm := opt
	warm.Duration = max(opt.Duration/10, 500*time.Millisecond)
	for _, url := range []string{upSrv.URL, gwSrv.URL} {
		if _, _, _, err := loadPhase(ctx, client, url, warm); err != nil {
			return GatewayReport{}, err
		}
	}
	direct, directErrs, _, err := loadPhase(ctx, client, upSrv.URL, opt)
	if err != nil {
		return GatewayReport{}, err
	}
	via, viaErrs, wall, err := loadPhase(ctx, client, gwSrv.URL, opt)
	if err != nil {
		return GatewayReport{}, err
	}
	ms := func(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }
	rep := GatewayReport{
		Scenario: "gateway", Rate: opt.Rate, DurationS: opt.Duration.Seconds(), Requests: len(via) + viaErrs,
		DirectP50MS: ms(percentile(direct, 0.50)), DirectP95MS: ms(percentile(direct, 0.95)), DirectP99MS: ms(percentile(direct, 0.99)),
		GatewayP50MS: ms(percentile(via, 0.50)), GatewayP95MS: ms(percentile(via, 0.95)), GatewayP99MS: ms(percentile(via, 0.99)),
		DirectErrors: directErrs, GatewayErrors: viaErrs, Errors: directErrs + viaErrs,
	}
	rep.AddedP50MS = round(rep.GatewayP50MS-rep.DirectP50MS, 3)
	rep.AddedP95MS = round(rep.GatewayP95MS-rep.DirectP95MS, 3)
	rep.AddedP99MS = round(rep.GatewayP99MS-rep.DirectP99MS, 3)
	if wall > 0 {
		rep.AchievedRate = round(float64(rep.Requests)/wall.Seconds(), 1)
	}
	if opt.JSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(w, string(b))
	} else {
		fmt.Fprintf(w, "gateway: %d req/s for %v, %d requests: added p50 %.3f ms, p95 %.3f ms, p99 %.3f ms (direct p95 %.3f ms, gateway p95 %.3f ms); errors %d direct, %d gateway\n",
			rep.Rate, opt.Duration, rep.Requests, rep.AddedP50MS, rep.AddedP95MS, rep.AddedP99MS, rep.DirectP95MS, rep.GatewayP95MS, directErrs, viaErrs)
	}
	return rep, nil
}

// loadPhase sends opt.Rate streamed requests per second to url for
// opt.Duration, each at its scheduled time whatever the others' progress
// (open loop), and returns the latencies of the successes, the count of
// failures and the phase's wall time. It fails only when ctx ends.
func loadPhase(ctx context.Context, client *http.Client, url string, opt GatewayOptions) ([]time.Duration, int, time.Duration, error) {
	n := int(opt.Duration.Seconds() * float64(opt.Rate))
	interval := time.Second / time.Duration(opt.Rate)
	var (
		mu    sync.Mutex // protects lats and fails
		lats  = make([]time.Duration, 0, n)
		fails int
	)
	var g errgroup.Group
	g.SetLimit(gatewayMaxOpen)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				_ = g.Wait() // every request ends with ctx
				return nil, 0, 0, ctx.Err()
			}
		}
		g.Go(func() error {
			t0 := time.Now()
			err := gatewayRequest(ctx, client, url)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails++
			} else {
				lats = append(lats, d)
			}
			return nil // failures are counted, not fatal
		})
	}
	_ = g.Wait() // the goroutines return nil
	wall := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	slices.Sort(lats)
	return lats, fails, wall, nil
}

// gatewayRequest sends one streamed chat completion and reads it to its
// end, checking it ends with [DONE].
func gatewayRequest(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(gatewayBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]") {
		return fmt.Errorf("status %d, body %.100q", resp.StatusCode, body)
	}
	return nil
}
