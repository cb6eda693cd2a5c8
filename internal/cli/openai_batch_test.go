package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunOpenAIBatchResumes runs a file in OpenAI's batch format offline,
// interrupts it, and runs it again: the second run finishes the batch and
// the results file holds every custom_id once, in input order, with
// OpenAI's output line format (an unknown model's line too: the backend
// URL answers every model the file names).
func TestRunOpenAIBatchResumes(t *testing.T) {
	dir := t.TempDir()
	const n = 1500
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m%d","messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, i%3, i)
	}
	input := filepath.Join(dir, "requests.jsonl")
	if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results.jsonl")
	args := []string{"run", "--openai-batch", input, "--out", out, "--backend", "sim://?latency=40ms", "--quiet"}

	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	code, _, stderr := run(t, ctx, args...)
	if code != 130 {
		t.Fatalf("interrupted run: exit %d, want 130: %s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("an interrupted run wrote the results file")
	}
	code, _, stderr = run(t, t.Context(), args...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != n {
		t.Fatalf("%d result lines, want %d", len(lines), n)
	}
	for i, line := range lines {
		var r struct {
			ID       string `json:"id"`
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Model string `json:"model"`
				} `json:"body"`
			} `json:"response"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if r.CustomID != fmt.Sprintf("c%d", i) || r.Response.StatusCode != 200 || r.Response.Body.Model != fmt.Sprintf("m%d", i%3) || r.Error != nil || !strings.HasPrefix(r.ID, "batch_req_") {
			t.Fatalf("line %d: %s", i+1, line)
		}
	}
	// A third run finds the batch done and writes the same results.
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("third run: exit %d: %s", code, stderr)
	}
}

// TestRunOpenAIBatchLinesOffTerminal: with stderr not a terminal, what
// `run --openai-batch` prints ends with a newline per line: no carriage
// return, no report glued to the next, the final counts on a line of
// their own. (It used to redraw its report with "\r" as if on a terminal,
// gluing every report and the final line into one.)
func TestRunOpenAIBatchLinesOffTerminal(t *testing.T) {
	dir := t.TempDir()
	const n = 200
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, i)
	}
	input := filepath.Join(dir, "requests.jsonl")
	if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results.jsonl")
	code, _, stderr := run(t, t.Context(), "run", "--openai-batch", input, "--out", out, "--backend", "sim://?latency=30ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("stderr holds a carriage return:\n%q", stderr)
	}
	if !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr does not end with a newline: %q", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	for i, l := range lines {
		if strings.Count(l, "batch_") > 1 {
			t.Errorf("line %d holds more than one report: %q", i+1, l)
		}
	}
	// The summary: the final counts on a line of their own, then the
	// tokens, their cost (the model "m" has no price) and the results.
	if len(lines) < 4 {
		t.Fatalf("stderr = %q, want the final counts and a summary", stderr)
	}
	summary := lines[len(lines)-4:]
	if h := summary[0]; !strings.HasPrefix(h, "batch batch_") || !strings.HasSuffix(h, fmt.Sprintf(" completed: %d completed, 0 failed of %d", n, n)) {
		t.Errorf("summary heading %q, want the batch's final counts alone", h)
	}
	if !regexp.MustCompile(`^ +tokens: prompt [1-9][0-9.k]* \(cached [0-9.k]+\) · completion [1-9][0-9.k]*$`).MatchString(summary[1]) ||
		summary[2] != "     cost: unknown (no price for model m)" || summary[3] != "  results: "+out {
		t.Errorf("summary:\n%s\nwant the tokens, an unknown cost and the results file", strings.Join(summary, "\n"))
	}
}
