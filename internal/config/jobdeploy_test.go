package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/jobrun"
)

// closedAddr returns the address of a port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// runDeployedJob opens the job file text as a run opens it (jobrun.OpenJob)
// and runs n inputs on a new engine. It returns the results, the job (its
// Router's stats) and what the job logged, Close included.
func runDeployedJob(t *testing.T, text string, n int) ([]batchagent.Result, *jobrun.Job, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cj, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	j, err := jobrun.OpenJob(t.Context(), path, cj, jobrun.JobOptions{NoCache: true, Logger: logger})
	if err != nil {
		t.Fatalf("OpenJob = %v", err)
	}
	cfg, err := j.EngineConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"input": fmt.Sprintf("item %d", i)}
	}
	res, err := e.Run(t.Context(), j.Spec, batchagent.Slice(inputs))
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	return res, j, log.String()
}

// TestJobDeployments: a job over two sim+http deployments runs every
// input, and both deployments got calls; the engine's gate holds the
// calls at the deployments' summed limit.
func TestJobDeployments(t *testing.T) {
	a, b := newDeployment(t, 1), newDeployment(t, 2)
	text := fmt.Sprintf(`task: "Summarize: {input}"
backend:
  deployments:
    - {name: a, url: "sim+http://%s", max_inflight: 4, fixed_inflight: true}
    - {name: b, url: "sim+http://%s", max_inflight: 4, fixed_inflight: true}
  cooldown: 300ms
`, a.addr, b.addr)
	res, j, log := runDeployedJob(t, text, 60)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("input %d: %v", r.Index, r.Err)
		}
	}
	if len(res) != 60 {
		t.Fatalf("%d results, want 60", len(res))
	}
	if j.Router == nil {
		t.Fatal("the job has no router")
	}
	var total int64
	for _, st := range j.Router.Stats() {
		if st.Requests == 0 || st.Failures != 0 {
			t.Errorf("deployment %s: %d requests, %d failures; want some, none failed", st.Name, st.Requests, st.Failures)
		}
		total += st.Requests
	}
	if total < 60 {
		t.Errorf("%d calls in all, want at least one per input (60)", total)
	}
	if got := a.sim.Stats().Requests + b.sim.Stats().Requests; got != total {
		t.Errorf("the servers got %d requests, the router counted %d", got, total)
	}
	cfg, err := j.EngineConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Admission; a.MaxInflight != 8 || !a.FixedInflight {
		t.Errorf("admission max_inflight %d fixed %v, want 8 (the deployments' sum), fixed", a.MaxInflight, a.FixedInflight)
	}
	for _, want := range []string{"backend: 2 deployments: a (max_inflight 4), b (max_inflight 4)", "deployment=a", "deployment=b"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestJobDeploymentDown: one deployment down from the start (a closed
// port): every input is still answered, by the other, and the log names
// the dead one with its failures and its breaker not closed.
func TestJobDeploymentDown(t *testing.T) {
	a := newDeployment(t, 1)
	dead := closedAddr(t)
	text := fmt.Sprintf(`task: "Summarize: {input}"
backend:
  deployments:
    - {name: live, url: "sim+http://%s", max_inflight: 4}
    - {name: dead, url: "sim+http://%s", max_inflight: 4}
  cooldown: 10s
`, a.addr, dead)
	res, j, log := runDeployedJob(t, text, 40)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("input %d: %v", r.Index, r.Err)
		}
	}
	st := j.Router.Stats()
	if st[1].Name != "dead" || st[1].Failures == 0 || st[1].State == "closed" {
		t.Errorf("dead deployment: %+v; want failures and its breaker not closed", st[1])
	}
	if st[0].Failures != 0 || st[0].Requests < 40 {
		t.Errorf("live deployment: %+v; want every input's call, none failed", st[0])
	}
	if want := fmt.Sprintf("deployment=dead requests=%d failures=%d breaker=%s", st[1].Requests, st[1].Failures, st[1].State); !strings.Contains(log, want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
}

// TestJobDeploymentsBackendFlag: --backend replaces the deployments as it
// replaces a backend URL: one backend, no router.
func TestJobDeploymentsBackendFlag(t *testing.T) {
	text := fmt.Sprintf("task: t\nbackend:\n  deployments:\n    - {url: \"sim+http://%s\"}\n", closedAddr(t))
	cj, err := config.Parse([]byte(text), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j, err := jobrun.OpenJob(t.Context(), "job.yaml", cj, jobrun.JobOptions{Backend: "sim://", NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.Router != nil || j.Backend != "sim://" {
		t.Errorf("with --backend: router %v, backend %q; want none, sim://", j.Router, j.Backend)
	}
}

// TestJobDeploymentsParse: deployments decode with their keys, the job's
// Backend is the first one's URL, and the job marshals back to the same.
func TestJobDeploymentsParse(t *testing.T) {
	text := `task: t
model: m
backend:
  deployments:
    - {name: eu, url: "http://eu:8000/v1", api_key_env: EU_KEY, max_inflight: 64, weight: 2}
    - {url: "http://us:8000/v1", model: m2, rpm: 600, fixed_inflight: true}
  cooldown: 2s
`
	cj, err := config.Parse([]byte(text), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Deployment{
		{Name: "eu", URL: "http://eu:8000/v1", APIKeyEnv: "EU_KEY", MaxInflight: 64, Weight: 2},
		{URL: "http://us:8000/v1", Model: "m2", RPM: 600, FixedInflight: true},
	}
	if len(cj.Deployments) != 2 || cj.Deployments[0] != want[0] || cj.Deployments[1] != want[1] || cj.Cooldown.Seconds() != 2 {
		t.Fatalf("deployments %+v cooldown %v, want %+v 2s", cj.Deployments, cj.Cooldown, want)
	}
	if cj.Backend != "http://eu:8000/v1" {
		t.Errorf("Backend = %q, want the first deployment's URL", cj.Backend)
	}
	out, err := yaml.Marshal(cj)
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse(out, "back.yaml", t.TempDir())
	if err != nil {
		t.Fatalf("marshalled job does not parse: %v\n%s", err, out)
	}
	if len(back.Deployments) != 2 || back.Deployments[0] != want[0] || back.Deployments[1] != want[1] || back.Cooldown != cj.Cooldown || back.Backend != cj.Backend {
		t.Errorf("round trip: %+v %v %q\n%s", back.Deployments, back.Cooldown, back.Backend, out)
	}
	if got := config.DeploymentsLine(cj.Deployments); got != "2 deployments: eu (max_inflight 64), http://us:8000" {
		t.Errorf("DeploymentsLine = %q", got)
	}
}

// TestJobDeploymentsErrors: each mistake is named with the file, its line
// and column, and its key.
func TestJobDeploymentsErrors(t *testing.T) {
	for _, tt := range []struct{ name, backend, extra, want string }{
		{"no url", "  deployments:\n    - {max_inflight: 4}\n", "", `job.yaml:4:7: backend.deployments[0].url: required key is missing`},
		{"url and deployments", "  url: sim://\n  deployments:\n    - {url: sim://}\n", "", `job.yaml:3:3: backend.url: write backend as one URL (backend: URL) or as a mapping of deployments, not both`},
		{"negative limit", "  deployments:\n    - {url: sim://, max_inflight: -1}\n", "", `job.yaml:4:7: backend.deployments[0]: weight, max_inflight and rpm must be finite and not negative (weight 0, max_inflight -1, rpm 0)`},
		{"unknown key", "  deployments:\n    - {url: sim://, max_inflite: 4}\n", "", `job.yaml:4:21: backend.deployments[0].max_inflite: unknown key "max_inflite"`},
		{"no deployments", "  cooldown: 5s\n", "", `job.yaml:3:3: backend.deployments: required key is missing`},
		{"negative cooldown", "  deployments:\n    - {url: sim://}\n  cooldown: -1s\n", "", `job.yaml:3:3: backend.cooldown: must not be negative`},
		{"bad scheme", "  deployments:\n    - {url: \"opneai://x\"}\n", "", `job.yaml:4:13: backend.deployments[0].url: unsupported scheme "opneai" (did you mean "openai"?)`},
		{"batch url", "  deployments:\n    - {url: \"sim+http://h:1?mode=batch\"}\n", "", `job.yaml:4:7: backend.deployments[0].url: a deployment is called in real time`},
		{"batch delivery", "  deployments:\n    - {url: \"sim+http://h:1\"}\n", "delivery: batch\n", `job.yaml:5:11: delivery: batch delivery goes through one provider account's batch API: it takes one backend URL, not backend.deployments (line 3)`},
		{"a list", "  - sim://\n", "", `job.yaml:3:3: backend: expected a backend URL or a mapping of deployments, got a list`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := "task: t\nbackend:\n" + tt.backend + tt.extra
			_, err := config.Parse([]byte(text), "job.yaml", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse =\n%v\nwant it to contain\n%s\n(file:\n%s)", err, tt.want, text)
			}
		})
	}
}
