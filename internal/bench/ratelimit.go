package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// Defaults of the ratelimit scenario.
const (
	// DefaultRatelimitN is the ratelimit scenario's number of agents per
	// line: about 25 s at the enforced 600 requests a minute.
	DefaultRatelimitN = 300
	// RatelimitWorkers is the number of worker processes of the scenario's
	// second line, which share the account through Redis.
	RatelimitWorkers = 3
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
	// Exe is the batchagent binary whose worker and run --redis commands
	// the second line runs (RatelimitWorkers workers and a coordinator on
	// a fresh redis-server). "": the one-process line only.
	Exe string
	// Dir holds the second line's files (job, inputs, results, Redis's).
	// "": a temporary directory, removed after.
	Dir string
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
// RatelimitTPM with OpenAI's headers, no limit configured: the pacing
// comes from the headers alone. The first line runs them in one process
// (workers 1); with opt.Exe, the second through RatelimitWorkers worker
// processes and a coordinator sharing a redis-server, whose workers share
// the limits any of them learnt (queue.SharedRate.Sync).
func RunRatelimit(ctx context.Context, opt RatelimitOptions, w io.Writer) ([]RatelimitReport, error) {
	if opt.N < 0 {
		return nil, errors.New("bench: ratelimit wants -n ≥ 0")
	}
	if opt.N == 0 {
		opt.N = DefaultRatelimitN
	}
	var reports []RatelimitReport
	r, err := ratelimitRun(ctx, opt.N)
	if err != nil {
		return nil, err
	}
	printRatelimit(w, opt.JSON, r)
	reports = append(reports, r)
	if opt.Exe == "" {
		return reports, nil
	}
	dir := opt.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "batchagent-ratelimit-"); err != nil {
			return reports, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	r, err = ratelimitWorkersRun(ctx, opt.Exe, dir, opt.N, RatelimitWorkers)
	if err != nil {
		return reports, err
	}
	printRatelimit(w, opt.JSON, r)
	return append(reports, r), nil
}

// printRatelimit prints one line of the scenario.
func printRatelimit(w io.Writer, asJSON bool, r RatelimitReport) {
	if asJSON {
		out, _ := json.Marshal(r)
		fmt.Fprintln(w, string(out))
		return
	}
	fmt.Fprintf(w, "ratelimit workers=%d n=%d  wall %.1fs  429s %d (%d in all)  %.0f rpm / %d  %.0f tpm / %d  limit share %.3f  learnt %d rpm %d tpm  ok %d  failed %d\n",
		r.Workers, r.N, r.WallS, r.HTTP429, r.HTTP429Total, r.AchievedRPM, r.RPM, r.AchievedTPM, r.TPM, r.LimitShare, r.LearntRPM, r.LearntTPM, r.OK, r.Failed)
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

// ratelimitServer is the rate-limited simulator of the scenario, served
// on a local port, with the log of its answers.
type ratelimitServer struct {
	srv  *simhttp.Server
	addr string
	log  statusLog
	stop func()
}

// startRatelimitServer serves a fresh simulator enforcing RatelimitRPM
// and RatelimitTPM; stop ends it.
func startRatelimitServer(ctx context.Context) (*ratelimitServer, error) {
	srv, err := simhttp.New(simhttp.Config{
		Model:           sim.Config{ToolTurns: -1, Seed: 1},
		MaxSeqs:         64,
		MaxQueue:        -1,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 10 * time.Microsecond,
		RPM: RatelimitRPM, TPM: RatelimitTPM,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rs := &ratelimitServer{srv: srv, addr: ln.Addr().String()}
	sctx, cancel := context.WithCancel(ctx)
	hs := &http.Server{Handler: rs.log.wrap(srv), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(sctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	rs.stop = func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	}
	return rs, nil
}

// measure fills r's 429 counts and rates from the server's log and stats.
func (rs *ratelimitServer) measure(r *RatelimitReport) {
	ss := rs.srv.Stats()
	r.LLMCalls = ss.Requests
	log := &rs.log
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
}

// ratelimitRun runs the agents in this process against a fresh
// rate-limited simulator.
func ratelimitRun(ctx context.Context, n int) (RatelimitReport, error) {
	r := RatelimitReport{Scenario: "ratelimit", Workers: 1, N: n, RPM: RatelimitRPM, TPM: RatelimitTPM}
	rs, err := startRatelimitServer(ctx)
	if err != nil {
		return r, err
	}
	defer rs.stop()
	ocfg, err := openai.ParseURL("sim+http://" + rs.addr)
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
	rs.measure(&r)
	return r, ctx.Err()
}

// ratelimitWorkersRun runs the agents through workers worker processes of
// exe and a coordinator (run --redis) on a fresh redis-server in dir,
// against a fresh rate-limited simulator, with no limit in the job: the
// workers pace from the limits the headers report, shared in Redis.
func ratelimitWorkersRun(ctx context.Context, exe, dir string, n, workers int) (RatelimitReport, error) {
	r := RatelimitReport{Scenario: "ratelimit", Workers: workers, N: n, RPM: RatelimitRPM, TPM: RatelimitTPM}
	rs, err := startRatelimitServer(ctx)
	if err != nil {
		return r, err
	}
	defer rs.stop()
	redis, addr, err := startRedis(ctx, dir)
	if err != nil {
		return r, err
	}
	defer func() {
		_ = redis.Process.Kill()
		_ = redis.Wait()
	}()
	url := "redis://" + addr
	job := fmt.Sprintf(`name: ratelimit
backend: "sim+http://%s"
system: "You answer in one short sentence."
task: "Describe item {id}."
max_tokens: 64
cache: off
limits:
  max_retries: 10
`, rs.addr)
	jobPath := filepath.Join(dir, "ratelimit.yaml")
	if err := os.WriteFile(jobPath, []byte(job), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"id\": %d}\n", i)
	}
	inPath, outPath := filepath.Join(dir, "ratelimit-in.jsonl"), filepath.Join(dir, "ratelimit-out.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			if p.ProcessState == nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
	}()
	for i := range workers {
		cmd := exec.CommandContext(ctx, exe, "worker", "--redis", url, "--max-active", strconv.Itoa(n), "--id", fmt.Sprintf("ratelimit-%d", i))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			return r, fmt.Errorf("bench: start worker: %w", err)
		}
		procs = append(procs, cmd)
	}
	start := time.Now()
	coord := exec.CommandContext(ctx, exe, "run", jobPath, "--inputs", inPath, "--out", outPath, "--redis", url, "--no-cache")
	var stderr strings.Builder
	coord.Stdout, coord.Stderr = io.Discard, &stderr
	if err := coord.Run(); err != nil {
		return r, fmt.Errorf("bench: coordinator: %w: %s", err, tail(stderr.String()))
	}
	r.WallS = round(time.Since(start).Seconds(), 3)
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		_ = p.Wait()
	}
	r.OK, r.Failed, err = countResultLines(outPath, n)
	if err != nil {
		return r, err
	}
	// The workers learnt the limits from the headers: their shared budget
	// holds them in Redis.
	r.LearntRPM, r.LearntTPM = learntInRedis(ctx, addr)
	rs.measure(&r)
	return r, ctx.Err()
}

// learntScript answers "RPM TPM" of the first learnt limits in Redis
// (queue.SharedRate keeps them in a hash whose key ends in ":learnt").
const learntScript = `local k = redis.call("KEYS", "*:learnt")[1]
if not k then return "0 0" end
local v = redis.call("HMGET", k, "rpm", "tpm")
return (v[1] or "0") .. " " .. (v[2] or "0")`

// learntInRedis returns the limits the workers learnt and shared in the
// Redis at addr; zeros when none were or Redis does not say.
func learntInRedis(ctx context.Context, addr string) (rpm, tpm int) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return 0, 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	args := []string{"EVAL", learntScript, "0"}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return 0, 0
	}
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, 0
	}
	body, err := br.ReadString('\n')
	if err != nil {
		return 0, 0
	}
	_, _ = fmt.Sscanf(strings.TrimSpace(body), "%d %d", &rpm, &tpm)
	return rpm, tpm
}
