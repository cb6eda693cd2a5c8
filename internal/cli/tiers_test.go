package cli_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
)

// tinyJob is a tool-free job with a small output schema, for the keys of
// fallbacks and packing.
const tinyJob = `task: "Plan for {id}"
output_schema:
  type: object
  properties:
    value: {type: integer}
  required: [value]
`

// inputsFile writes n JSONL inputs {"id": 0..n-1} and returns the path.
func inputsFile(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	return writeFile(t, dir, "in.jsonl", b.String())
}

// checkOneValidEach checks that stdout holds one valid result for each of
// n inputs.
func checkOneValidEach(t *testing.T, stdout string, n int) {
	t.Helper()
	seen := map[int]bool{}
	lines := readLines(t, stdout)
	for _, l := range lines {
		if l.Error != nil || l.Output["value"] == nil {
			t.Errorf("line %d = %+v, want a valid output", l.Index, l)
		}
		seen[l.Index] = true
	}
	if len(lines) != n || len(seen) != n {
		t.Errorf("got %d lines for %d distinct inputs, want %d and %d", len(lines), len(seen), n, n)
	}
}

// TestRunFallbackTier runs a job whose backend fails every call, with one
// fallback tier and a 1s budget: every input is answered, by tier 1, as
// the summary says. The timeout bounds each agent with all its tiers:
// without the tier, the agents fail within 10s.
func TestRunFallbackTier(t *testing.T) {
	t.Setenv("BATCHAGENT_BUDGET", "1m") // the file's budget wins
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?fail=1"
limits:
  budget: 1s
  timeout: 10s
fallbacks:
  - backend: "sim://?seed=3"
`+tinyJob)
	in := inputsFile(t, dir, 5)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	checkOneValidEach(t, stdout, 5)
	if !strings.Contains(stderr, "answered by tier 1: 5 ") {
		t.Errorf("summary does not say tier 1 answered all 5:\n%s", stderr)
	}
}

// TestRunFallbackBudgetFromEnv checks that BATCHAGENT_BUDGET gives the
// budget of a job file that sets none: under the default 60s the agents
// would hit their 10s timeout first.
func TestRunFallbackBudgetFromEnv(t *testing.T) {
	t.Setenv("BATCHAGENT_BUDGET", "500ms")
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?fail=1"
limits:
  timeout: 10s
fallbacks:
  - backend: "sim://?seed=3"
`+tinyJob)
	in := inputsFile(t, dir, 3)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	checkOneValidEach(t, stdout, 3)
	if !strings.Contains(stderr, "answered by tier 1: 3 ") {
		t.Errorf("summary does not say tier 1 answered all 3:\n%s", stderr)
	}
}

// TestRunFallbackOpenError checks that a fallback backend that cannot be
// opened stops the run with a usage error naming the job file and the
// tier, and that no key set in the environment is shown.
func TestRunFallbackOpenError(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", backendtest.APIKey) // not the tier's variable
	t.Setenv("FALLBACK_KEY", "")
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `fallbacks:
  - backend: "sim://"
  - backend: "openai://"
    api_key_env: FALLBACK_KEY
`+tinyJob)
	in := inputsFile(t, dir, 1)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (a tier that cannot be opened); stderr:\n%s", code, stderr)
	}
	want := job + ": fallbacks[1]: backend openai://: no API key: set FALLBACK_KEY"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want it to contain %q", stderr, want)
	}
	if what := backendtest.Leak(stdout + stderr); what != "" {
		t.Errorf("the error shows the %s:\n%s", what, stderr)
	}
}

// TestRunFallbackShowsNoSecret runs a job whose fallback tier answers from
// a server that rejects the tier's key and echoes it: the key, read from
// the tier's api_key_env, reaches neither the results nor stderr.
func TestRunFallbackShowsNoSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		msg := "invalid api key " + key + " (" + base64.StdEncoding.EncodeToString([]byte(key)) + ") for " + r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	}))
	defer srv.Close()
	t.Setenv("FALLBACK_KEY", backendtest.APIKey)
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?fail=1"
limits:
  budget: 1s
  timeout: 10s
fallbacks:
  - backend: "openai+http://`+strings.TrimPrefix(srv.URL, "http://")+"/"+backendtest.PathToken+`/v1"
    api_key_env: FALLBACK_KEY
`+tinyJob)
	in := inputsFile(t, dir, 2)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (every tier failed); stderr:\n%s", code, stderr)
	}
	lines := readLines(t, stdout)
	if len(lines) != 2 {
		t.Fatalf("%d result lines, want 2:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		// The tier's server was asked, and its words are kept.
		if l.Error == nil || !strings.Contains(l.Error.Message, "invalid api key") {
			t.Errorf("line %d: error %+v, want the fallback server's message", l.Index, l.Error)
		}
	}
	if what := backendtest.Leak(stdout + stderr); what != "" {
		t.Errorf("the output shows the %s:\nstdout:\n%s\nstderr:\n%s", what, stdout, stderr)
	}
}

// TestRunPackedJob runs a job that allows packing: it succeeds with one
// valid result per input, packed or not.
func TestRunPackedJob(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=4\"\npack: {max_agents: 8}\n"+tinyJob)
	in := inputsFile(t, dir, 20)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	checkOneValidEach(t, stdout, 20)
}
