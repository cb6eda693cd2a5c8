package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults of the scaleout scenario.
const (
	// DefaultScaleoutN is the agents of each run.
	DefaultScaleoutN = 2048
	// ScaleoutMaxActive caps each worker's active agents, as a real
	// deployment caps the agents per GPU.
	ScaleoutMaxActive = 32
	// scaleoutLatency is each model call of the latency-bound workload.
	scaleoutLatency = 100 * time.Millisecond
)

// ScaleoutOptions configures the scaleout scenario.
type ScaleoutOptions struct {
	// N is the number of agents of each run. Defaults to DefaultScaleoutN.
	N int
	// Workers lists the worker counts to run. Defaults to 1, 2 and 4.
	Workers []int
	// Dir holds the scenario's files. Defaults to a temporary directory.
	Dir string
	// JSON prints one JSON object per worker count.
	JSON bool
}

// ScaleoutReport is one worker count of the scaleout scenario.
type ScaleoutReport struct {
	Scenario string  `json:"scenario"`
	Workers  int     `json:"workers"`
	N        int     `json:"n"`
	WallS    float64 `json:"wall_s"`
	// AgentsPerS is the throughput; Speedup it over the first worker
	// count's.
	AgentsPerS float64 `json:"agents_per_s"`
	Speedup    float64 `json:"speedup"`
	// RedisOpsPerAgent is the commands Redis processed over the run,
	// per agent; CPUMSPerAgent the CPU time of the coordinator and the
	// workers, per agent.
	RedisOpsPerAgent float64 `json:"redis_ops_per_agent"`
	CPUMSPerAgent    float64 `json:"cpu_ms_per_agent"`
	OK               int     `json:"ok"`
	Failed           int     `json:"failed"`
}

// RunScaleout runs the scaleout scenario: a run of N latency-bound
// agents (two model calls of 100 ms each: a tool turn, then the answer)
// through `batchagent run --redis` and 1, 2 and 4 `batchagent worker`
// processes, each capped at ScaleoutMaxActive agents, on one redis-server
// started for it. exe is the batchagent binary.
func RunScaleout(ctx context.Context, exe string, opt ScaleoutOptions, w io.Writer) ([]ScaleoutReport, error) {
	if opt.N < 0 {
		return nil, errors.New("bench: -n must be positive")
	}
	if opt.N == 0 {
		opt.N = DefaultScaleoutN
	}
	if len(opt.Workers) == 0 {
		opt.Workers = []int{1, 2, 4}
	}
	dir := opt.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "batchagent-scaleout-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var reports []ScaleoutReport
	for _, n := range opt.Workers {
		r, err := scaleoutRun(ctx, exe, dir, opt.N, n)
		if err != nil {
			return reports, err
		}
		if len(reports) > 0 && reports[0].AgentsPerS > 0 {
			r.Speedup = r.AgentsPerS / reports[0].AgentsPerS
		} else {
			r.Speedup = 1
		}
		reports = append(reports, r)
		if opt.JSON {
			out, _ := json.Marshal(r)
			fmt.Fprintln(w, string(out))
			continue
		}
		fmt.Fprintf(w, "scaleout workers=%d n=%d  wall %.2fs  %.0f agents/s  speedup %.2f×  redis ops/agent %.1f  cpu %.2f ms/agent  ok %d  failed %d\n",
			r.Workers, r.N, r.WallS, r.AgentsPerS, r.Speedup, r.RedisOpsPerAgent, r.CPUMSPerAgent, r.OK, r.Failed)
	}
	return reports, nil
}

// scaleoutRun runs one worker count on a fresh redis-server.
func scaleoutRun(ctx context.Context, exe, dir string, n, workers int) (ScaleoutReport, error) {
	r := ScaleoutReport{Scenario: "scaleout", Workers: workers, N: n}
	run := filepath.Join(dir, fmt.Sprintf("w%d", workers))
	if err := os.MkdirAll(run, 0o755); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	redis, addr, err := startRedis(ctx, run)
	if err != nil {
		return r, err
	}
	defer func() {
		_ = redis.Process.Kill()
		_ = redis.Wait()
	}()
	url := "redis://" + addr
	if err := os.WriteFile(filepath.Join(run, "doc.txt"), []byte("the shared document\n"), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	job := fmt.Sprintf(`name: scaleout
backend: "sim://?latency=%s&tool_turns=1&seed=1"
task: "Read path: doc.txt and summarise item {id}."
tools:
  - name: read_file
    roots: [%q]
limits:
  max_turns: 4
output_schema: {type: object, properties: {summary: {type: string}}, required: [summary]}
`, scaleoutLatency, run)
	jobPath := filepath.Join(run, "job.yaml")
	if err := os.WriteFile(jobPath, []byte(job), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"id\": %d}\n", i)
	}
	inPath, outPath := filepath.Join(run, "in.jsonl"), filepath.Join(run, "out.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	ops0, err := redisCommands(addr)
	if err != nil {
		return r, err
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
		cmd := exec.CommandContext(ctx, exe, "worker", "--redis", url, "--max-active", strconv.Itoa(ScaleoutMaxActive), "--id", fmt.Sprintf("bench-%d", i))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			return r, fmt.Errorf("bench: start worker: %w", err)
		}
		procs = append(procs, cmd)
	}
	start := time.Now()
	coord := exec.CommandContext(ctx, exe, "run", jobPath, "--inputs", inPath, "--out", outPath, "--redis", url)
	var stderr strings.Builder
	coord.Stdout, coord.Stderr = io.Discard, &stderr
	if err := coord.Run(); err != nil {
		return r, fmt.Errorf("bench: coordinator: %w: %s", err, tail(stderr.String()))
	}
	r.WallS = time.Since(start).Seconds()
	r.AgentsPerS = float64(n) / r.WallS
	ops1, err := redisCommands(addr)
	if err != nil {
		return r, err
	}
	cpu := cpuOf(coord)
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		_ = p.Wait()
		cpu += cpuOf(p)
	}
	r.RedisOpsPerAgent = float64(ops1-ops0) / float64(n)
	r.CPUMSPerAgent = float64(cpu.Microseconds()) / 1000 / float64(n)
	r.OK, r.Failed, err = countResultLines(outPath, n)
	return r, err
}

// cpuOf returns the user and system CPU time of an exited process.
func cpuOf(cmd *exec.Cmd) time.Duration {
	if cmd.ProcessState == nil {
		return 0
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// countResultLines counts the result lines of out: ok ones and failed ones,
// checking that each of the n indexes has exactly one.
func countResultLines(out string, n int) (ok, failed int, err error) {
	res, err := readResults(out, n)
	return res.ok, res.failed, err
}

// results is what a run's results file holds.
type results struct {
	ok, failed int
	// cost sums the lines' costs; costed counts the lines that have one.
	cost     float64
	costed   int
	maxCalls int // the most model calls of one line
}

// readResults reads the results file out of n inputs, checking that each
// of the n indexes has exactly one line.
func readResults(out string, n int) (results, error) {
	var res results
	f, err := os.Open(out)
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	seen := make([]bool, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var line struct {
			Index      int             `json:"index"`
			Error      json.RawMessage `json:"error"`
			Cost       *float64        `json:"cost"`
			ModelCalls int             `json:"model_calls"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return res, fmt.Errorf("bench: %s: %w", out, err)
		}
		if line.Index < 0 || line.Index >= n || seen[line.Index] {
			return res, fmt.Errorf("bench: %s: index %d out of range or seen twice", out, line.Index)
		}
		seen[line.Index] = true
		if len(line.Error) > 0 {
			res.failed++
		} else {
			res.ok++
		}
		if line.Cost != nil {
			res.cost += *line.Cost
			res.costed++
		}
		res.maxCalls = max(res.maxCalls, line.ModelCalls)
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("bench: %s: %w", out, err)
	}
	if res.ok+res.failed != n {
		return res, fmt.Errorf("bench: %s has %d results for %d inputs", out, res.ok+res.failed, n)
	}
	return res, nil
}

// startRedis starts a redis-server with its files in dir on a free
// loopback port.
func startRedis(ctx context.Context, dir string) (*exec.Cmd, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("bench: scaleout needs redis-server (apt-get install -y redis-server): %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("bench: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("bench: start redis-server: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := redisCommands(addr); err == nil {
			return cmd, addr, nil
		} else if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, "", fmt.Errorf("bench: redis-server on %s not ready: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisCommands returns the commands the Redis at addr has processed
// (INFO stats total_commands_processed), over a plain RESP connection.
func redisCommands(addr string) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO stats\r\n")); err != nil {
		return 0, err
	}
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("bench: INFO answered %q: %v", head, err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return 0, fmt.Errorf("bench: INFO answered %q", head)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(br, body); err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("bench: INFO stats has no total_commands_processed")
}

// tail returns the last lines of s, for an error message.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}
