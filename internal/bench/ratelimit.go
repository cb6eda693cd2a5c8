package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// Defaults of the ratelimit scenario.
const (
	// DefaultRatelimitN is the ratelimit scenario's number of agents:
	// about 35 s at the enforced 600 requests a minute.
	DefaultRatelimitN = 360
	// RatelimitRPM and RatelimitTPM are the limits the simulator enforces.
	RatelimitRPM = 600
	RatelimitTPM = 200_000
)

// RatelimitOptions configures the ratelimit scenario.
type RatelimitOptions struct {
	// N is the number of agents. Defaults to DefaultRatelimitN.
	N int
	// JSON prints one JSON object per line instead of a table row.
	JSON bool
}

// RatelimitReport is one line of the ratelimit scenario.
type RatelimitReport struct {
	Scenario string `json:"scenario"`
	// Workers is the number of processes that share the account.
	Workers int     `json:"workers"`
	N       int     `json:"n"`
	WallS   float64 `json:"wall_s"`
	// HTTP429 counts the 429 answers after the server's first answer (the
	// first calls go out before any header told the limits);
	// HTTP429Total counts them all.
	HTTP429      int64 `json:"http_429"`
	HTTP429Total int64 `json:"http_429_total"`
	// RPM and TPM are the limits enforced; AchievedRPM and AchievedTPM
	// the rates reached from the first answer to the last request.
	RPM         int     `json:"rpm"`
	TPM         int     `json:"tpm"`
	AchievedRPM float64 `json:"achieved_rpm"`
	AchievedTPM float64 `json:"achieved_tpm"`
	// LimitShare is the achieved rate ÷ the binding limit: the larger of
	// AchievedRPM/RPM and AchievedTPM/TPM.
	LimitShare float64 `json:"limit_share"`
	// LearntRPM and LearntTPM are the pacing's limits at the end, learnt
	// from the x-ratelimit-* headers (none were configured).
	LearntRPM int   `json:"learnt_rpm"`
	LearntTPM int   `json:"learnt_tpm"`
	LLMCalls  int64 `json:"llm_calls"`
	OK        int   `json:"ok"`
	Failed    int   `json:"failed"`
}

// RunRatelimit runs the ratelimit scenario: N single-call agents through
// the OpenAI backend against the HTTP simulator enforcing RatelimitRPM and
// RatelimitTPM with OpenAI's headers, no limit configured in the engine:
// its pacing comes from the headers alone. One process (workers 1).
func RunRatelimit(ctx context.Context, opt RatelimitOptions, w io.Writer) ([]RatelimitReport, error) {
	if opt.N < 0 {
		return nil, errors.New("bench: ratelimit wants -n ≥ 0")
	}
	if opt.N == 0 {
		opt.N = DefaultRatelimitN
	}
	r, err := ratelimitRun(ctx, opt.N)
	if err != nil {
		return nil, err
	}
	if opt.JSON {
		out, _ := json.Marshal(r)
		fmt.Fprintln(w, string(out))
	} else {
		fmt.Fprintf(w, "ratelimit workers=%d n=%d  wall %.1fs  429s %d (%d in all)  %.0f rpm / %d  %.0f tpm / %d  limit share %.3f  learnt %d rpm %d tpm  ok %d  failed %d\n",
			r.Workers, r.N, r.WallS, r.HTTP429, r.HTTP429Total, r.AchievedRPM, r.RPM, r.AchievedTPM, r.TPM, r.LimitShare, r.LearntRPM, r.LearntTPM, r.OK, r.Failed)
	}
	return []RatelimitReport{r}, nil
}

// statusLog records when the server received each chat request and how
// it was answered.
type statusLog struct {
	mu          sync.Mutex
	firstAnswer time.Time   // when the first 200 was written; zero: none yet
	arrivals    []time.Time // of the requests answered 200
	limited     []time.Time // of the 429s
}

// wrap returns h, recording every chat request's arrival and status.
func (l *statusLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		switch sw.status {
		case http.StatusOK:
			l.arrivals = append(l.arrivals, arrived)
			if l.firstAnswer.IsZero() || sw.wrote.Before(l.firstAnswer) {
				l.firstAnswer = sw.wrote
			}
		case http.StatusTooManyRequests:
			l.limited = append(l.limited, arrived)
		}
	})
}

// statusWriter remembers the status and when the headers were written.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  time.Time
}

func (s *statusWriter) WriteHeader(code int) {
	if s.wrote.IsZero() {
		s.status, s.wrote = code, time.Now()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.wrote.IsZero() {
		s.wrote = time.Now()
	}
	return s.ResponseWriter.Write(p)
}

// Flush passes streaming through.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// ratelimitRun runs the agents against a fresh rate-limited simulator.
func ratelimitRun(ctx context.Context, n int) (RatelimitReport, error) {
	r := RatelimitReport{Scenario: "ratelimit", Workers: 1, N: n, RPM: RatelimitRPM, TPM: RatelimitTPM}
	srv, err := simhttp.New(simhttp.Config{
		Model:           sim.Config{ToolTurns: -1, Seed: 1},
		MaxSeqs:         64,
		MaxQueue:        -1,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 10 * time.Microsecond,
		RPM: RatelimitRPM, TPM: RatelimitTPM,
	})
	if err != nil {
		return r, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	var log statusLog
	sctx, cancel := context.WithCancel(ctx)
	hs := &http.Server{Handler: log.wrap(srv), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(sctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	defer func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	}()
	ocfg, err := openai.ParseURL("sim+http://" + ln.Addr().String())
	if err != nil {
		return r, err
	}
	m, err := openai.New(ocfg)
	if err != nil {
		return r, err
	}
	d := batchagent.Def{ID: "ratelimit", Model: m, System: "You answer in one short sentence.", Task: "Describe item {id}.", MaxTokens: 64, MaxRetries: 10}
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"id": i}
	}
	seen := make([]int, n)
	ok := make([]bool, n)
	start := time.Now()
	st, err := stream(ctx, batchagent.Config{MaxActive: n}, d, batchagent.Slice(in), func(res batchagent.Result) error {
		if res.Index < 0 || res.Index >= n {
			return fmt.Errorf("bench: result for index %d of %d inputs", res.Index, n)
		}
		seen[res.Index]++
		ok[res.Index] = res.Err == nil
		return nil
	})
	r.WallS = round(time.Since(start).Seconds(), 3)
	if err != nil {
		return r, err
	}
	for i := range seen {
		if seen[i] == 1 && ok[i] {
			r.OK++
		} else {
			r.Failed++
		}
	}
	r.LearntRPM, r.LearntTPM = st.RateLimits.RPM, st.RateLimits.TPM
	ss := srv.Stats()
	r.LLMCalls = ss.Requests
	log.mu.Lock()
	defer log.mu.Unlock()
	r.HTTP429Total = int64(len(log.limited))
	for _, t := range log.limited {
		if !log.firstAnswer.IsZero() && t.After(log.firstAnswer) {
			r.HTTP429++
		}
	}
	// The rate from the first answer on: the requests that arrived after
	// it, over the time from it to the last arrival.
	var after int
	var last time.Time
	for _, t := range log.arrivals {
		if t.After(log.firstAnswer) {
			after++
			if t.After(last) {
				last = t
			}
		}
	}
	if span := last.Sub(log.firstAnswer).Minutes(); after > 1 && span > 0 {
		r.AchievedRPM = round(float64(after)/span, 1)
		if answered := ss.Requests - ss.RateLimited; answered > 0 {
			perCall := float64(ss.PromptTokens+ss.GenerationTokens) / float64(answered)
			r.AchievedTPM = round(r.AchievedRPM*perCall, 0)
		}
		r.LimitShare = round(max(r.AchievedRPM/float64(r.RPM), r.AchievedTPM/float64(r.TPM)), 3)
	}
	return r, ctx.Err()
}
