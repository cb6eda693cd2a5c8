package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/internal/config"
)

// problemCase is a job file and the problems Parse must report for it.
// "$DIR" in In and in the messages stands for the job directory.
type problemCase struct {
	name string
	in   string
	want []config.Problem
}

// runProblemCases parses each case in dir and compares the problems.
func runProblemCases(t *testing.T, dir string, tests []problemCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := strings.ReplaceAll(tt.in, "$DIR", dir)
			want := make([]config.Problem, len(tt.want))
			for i, p := range tt.want {
				p.Msg = strings.ReplaceAll(p.Msg, "$DIR", dir)
				want[i] = p
			}
			j, err := config.Parse([]byte(in), "job.yaml", dir)
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse(%q) = %+v, %v, want a *config.Error", in, j, err)
			}
			if j != nil {
				t.Errorf("Parse(%q) job = %+v, want nil with an error", in, j)
			}
			if ce.File != "job.yaml" {
				t.Errorf("Parse(%q) error File = %q, want %q", in, ce.File, "job.yaml")
			}
			if diff := cmp.Diff(want, ce.Problems); diff != "" {
				t.Errorf("Parse(%q) problems mismatch (-want +got):\n%s", in, diff)
			}
		})
	}
}

func TestParseManyProblems(t *testing.T) {
	t.Parallel()
	const in = `name: demo
task: [a, b]
taks: Summarise {doc}
limits:
  max_turns: abc
  max_inflight: -1
  max_turnz: 3
  timeout: 30
tools:
  - name: web_search
`
	runProblemCases(t, t.TempDir(), []problemCase{{
		name: "all at once",
		in:   in,
		want: []config.Problem{
			{Line: 2, Col: 8, Path: "task[0]", Msg: `expected a mapping with one of text, image, audio or file, got "a"`},
			{Line: 2, Col: 11, Path: "task[1]", Msg: `expected a mapping with one of text, image, audio or file, got "b"`},
			{Line: 3, Col: 1, Path: "taks", Msg: `unknown key "taks" (did you mean "task"?)`},
			{Line: 5, Col: 14, Path: "limits.max_turns", Msg: "cannot unmarshal !!str `abc` into int"},
			{Line: 6, Col: 17, Path: "limits.max_inflight", Msg: "must not be negative, got -1"},
			{Line: 7, Col: 3, Path: "limits.max_turnz", Msg: `unknown key "max_turnz" (did you mean "max_turns"?)`},
			{Line: 8, Col: 12, Path: "limits.timeout", Msg: `invalid duration 30: want a duration like "30s"`},
			{Line: 10, Col: 11, Path: "tools[0].name", Msg: `unknown tool "web_search"; known tools: http_get, list_dir, read_file, sql_lookup, sql_query`},
		},
	}})
}

func TestParseStructuralProblems(t *testing.T) {
	t.Parallel()
	runProblemCases(t, t.TempDir(), []problemCase{
		{
			name: "unknown key far from any known key",
			in:   "task: x\nprompt: y\n",
			want: []config.Problem{{Line: 2, Col: 1, Path: "prompt", Msg: `unknown key "prompt"`}},
		},
		{
			name: "unknown key in a tool",
			in:   "task: x\ntools:\n  - name: read_file\n    roots: [$DIR]\n    max_byte: 10\n",
			want: []config.Problem{{Line: 5, Col: 5, Path: "tools[0].max_byte", Msg: `unknown key "max_byte" (did you mean "max_bytes"?)`}},
		},
		{
			name: "duplicate key",
			in:   "task: x\nmodel: a\nmodel: b\n",
			want: []config.Problem{{Line: 3, Col: 1, Path: "model", Msg: `duplicate key "model" (first at line 2)`}},
		},
		{
			name: "duplicate nested key",
			in:   "task: x\nlimits:\n  max_turns: 1\n  max_turns: 2\n",
			want: []config.Problem{{Line: 4, Col: 3, Path: "limits.max_turns", Msg: `duplicate key "max_turns" (first at line 3)`}},
		},
		{
			name: "mapping where a string is expected",
			in:   "task: x\nmodel: {name: gpt}\n",
			want: []config.Problem{{Line: 2, Col: 8, Path: "model", Msg: "expected a string, got a mapping"}},
		},
		{
			name: "scalar where a mapping is expected",
			in:   "task: x\nlimits: 5\n",
			want: []config.Problem{{Line: 2, Col: 9, Path: "limits", Msg: "expected a mapping, got 5"}},
		},
		{
			name: "scalar where a list is expected",
			in:   "task: x\ntools: read_file\n",
			want: []config.Problem{{Line: 2, Col: 8, Path: "tools", Msg: `expected a list, got "read_file"`}},
		},
		{
			name: "list where a mapping is expected",
			in:   "task: x\ntools: [[read_file]]\n",
			want: []config.Problem{{Line: 2, Col: 9, Path: "tools[0]", Msg: "expected a mapping, got a list"}},
		},
		{
			name: "float for an integer",
			in:   "task: x\nlimits: {max_active: 1.5}\n",
			want: []config.Problem{{Line: 2, Col: 22, Path: "limits.max_active", Msg: "expected an integer, got 1.5"}},
		},
		{
			name: "bad boolean",
			in:   "task: x\ntools:\n  - name: read_file\n    roots: [$DIR]\n    cacheable: maybe\n",
			want: []config.Problem{{Line: 5, Col: 16, Path: "tools[0].cacheable", Msg: "cannot unmarshal !!str `maybe` into bool"}},
		},
		{
			name: "bad duration",
			in:   "task: x\nlimits:\n  timeout: soon\n",
			want: []config.Problem{{Line: 3, Col: 12, Path: "limits.timeout", Msg: `invalid duration "soon": want a duration like "30s"`}},
		},
		{
			name: "root is a list",
			in:   "- task: x\n",
			want: []config.Problem{{Line: 1, Col: 1, Msg: "expected a mapping, got a list"}},
		},
		{
			name: "non-scalar key",
			in:   "task: x\n? [a]\n: b\n",
			want: []config.Problem{{Line: 2, Col: 3, Msg: "mapping key must be a string, got a list"}},
		},
		{
			name: "alias to a value containing it",
			in:   "task: x\ntools: [&t {<<: *t}]\n",
			want: []config.Problem{{Line: 2, Col: 17, Path: "tools[0]", Msg: "alias *t refers to a value that contains it"}},
		},
		{
			name: "merge of a scalar",
			in:   "task: x\nlimits: {<<: 5}\n",
			want: []config.Problem{{Line: 2, Col: 14, Path: "limits", Msg: "merge key value must be a mapping or a list of mappings, got 5"}},
		},
		{
			name: "YAML syntax error",
			in:   "task: x\nlimits:\n  max_turns: 1\n bad: : y\n",
			want: []config.Problem{{Line: 4, Msg: "invalid YAML: did not find expected key"}},
		},
		{
			name: "YAML syntax error on the first line",
			in:   "task: a: b\n",
			want: []config.Problem{{Line: 1, Msg: "invalid YAML: mapping values are not allowed in this context"}},
		},
		{
			name: "YAML parser error on the first line",
			in:   "{task: x model: y}\n",
			want: []config.Problem{{Line: 1, Msg: "invalid YAML: did not find expected ',' or '}'"}},
		},
		{
			name: "YAML parser error in a flow mapping",
			in:   "task: x\nmodel: m\nlimits: {max_turns: 1 max_active: 2}\n",
			want: []config.Problem{{Line: 3, Msg: "invalid YAML: did not find expected ',' or '}'"}},
		},
		{
			name: "unclosed flow mapping",
			in:   "{task: x\n",
			want: []config.Problem{{Line: 2, Msg: "invalid YAML: did not find expected ',' or '}'"}},
		},
		{
			name: "control character",
			in:   "task: x\nmodel: \"a\x01\"\n",
			want: []config.Problem{{Msg: "invalid YAML: control characters are not allowed"}},
		},
		{
			name: "unknown anchor",
			in:   "task: *x\n",
			want: []config.Problem{{Msg: "invalid YAML: unknown anchor 'x' referenced"}},
		},
		{
			name: "tab indentation",
			in:   "task: x\nlimits:\n\tmax_turns: 1\n",
			want: []config.Problem{{Line: 3, Msg: "invalid YAML: found character that cannot start any token"}},
		},
		{
			name: "empty file",
			in:   "",
			want: []config.Problem{{Line: 1, Col: 1, Msg: `job file is empty; it needs at least "task"`}},
		},
		{
			name: "comments only",
			in:   "# nothing yet\n",
			want: []config.Problem{{Line: 1, Col: 1, Msg: `job file is empty; it needs at least "task"`}},
		},
		{
			name: "two documents",
			in:   "task: x\n---\ntask: y\n",
			want: []config.Problem{{Line: 2, Col: 1, Msg: "job file has more than one YAML document"}},
		},
	})
}
