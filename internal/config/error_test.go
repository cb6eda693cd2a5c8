package config_test

import (
	"errors"
	"testing"

	"github.com/batchagent/batchagent/internal/config"
)

func TestErrorText(t *testing.T) {
	t.Parallel()
	e := &config.Error{File: "jobs/job.yaml", Problems: []config.Problem{
		{Line: 7, Col: 3, Path: "limits.max_turnz", Msg: `unknown key "max_turnz" (did you mean "max_turns"?)`},
		{Line: 2, Col: 7, Path: "task", Msg: "expected a string, got a list"},
		{Line: 2, Col: 1, Path: "taks", Msg: `unknown key "taks" (did you mean "task"?)`},
		{Line: 4, Msg: "invalid YAML: did not find expected key"},
		{Msg: "invalid YAML: control characters are not allowed"},
	}}
	const want = `jobs/job.yaml: invalid YAML: control characters are not allowed
jobs/job.yaml:2:1: taks: unknown key "taks" (did you mean "task"?)
jobs/job.yaml:2:7: task: expected a string, got a list
jobs/job.yaml:4: invalid YAML: did not find expected key
jobs/job.yaml:7:3: limits.max_turnz: unknown key "max_turnz" (did you mean "max_turns"?)`
	if got := e.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	if e.Problems[0].Line != 7 {
		t.Errorf("Error() reordered Problems: first is now %+v", e.Problems[0])
	}
}

func TestParseErrorText(t *testing.T) {
	t.Parallel()
	const in = "task: Summarise {doc}\nlimits:\n  max_turnz: 3\n  timeout: 30\n"
	_, err := config.Parse([]byte(in), "job.yaml", t.TempDir())
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse(%q) error = %v, want a *config.Error", in, err)
	}
	const want = `job.yaml:3:3: limits.max_turnz: unknown key "max_turnz" (did you mean "max_turns"?)
job.yaml:4:12: limits.timeout: invalid duration 30: want a duration like "30s"`
	if got := err.Error(); got != want {
		t.Errorf("Parse(%q) error =\n%s\nwant\n%s", in, got, want)
	}
}
