package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseToolOptions checks the options refused by tools that do not take
// them; no built-in tool is such a tool yet, so it uses its own table.
func TestParseToolOptions(t *testing.T) {
	t.Parallel()
	tools := map[string]toolSpec{
		"read_file": builtinTools["read_file"],
		"clock":     {},
	}
	const in = "task: x\ntools:\n  - name: clock\n    roots: [docs]\n    max_bytes: 10\n  - name: clock\n"
	_, err := parse([]byte(in), "job.yaml", t.TempDir(), tools)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("parse(%q) error = %v, want a *Error", in, err)
	}
	want := []Problem{
		{Line: 4, Col: 12, Path: "tools[0].roots", Msg: `tool "clock" does not take roots`},
		{Line: 5, Col: 16, Path: "tools[0].max_bytes", Msg: `tool "clock" does not take max_bytes`},
		{Line: 6, Col: 11, Path: "tools[1].name", Msg: `tool "clock" is already configured at line 3`},
	}
	if diff := cmp.Diff(want, ce.Problems); diff != "" {
		t.Errorf("parse(%q) problems mismatch (-want +got):\n%s", in, diff)
	}
}

func TestCheckTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		wantErr string
	}{
		{in: ""},
		{in: "plain text"},
		{in: "{a} and {b}"},
		{in: "{{literal}} {a}"},
		{in: "{{{a}}}"},
		{in: "}}{{"},
		{in: "{a", wantErr: `"{" at offset 0 is not closed (write "{{" for a literal brace)`},
		{in: "{a{b}", wantErr: `"{" at offset 0 is not closed (write "{{" for a literal brace)`},
		{in: "a}", wantErr: `"}" at offset 1 has no matching "{" (write "}}" for a literal brace)`},
		{in: "{a}}", wantErr: `"}" at offset 3 has no matching "{" (write "}}" for a literal brace)`},
		{in: "x {}", wantErr: `empty placeholder "{}" at offset 2`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			err := checkTemplate(tt.in)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("checkTemplate(%q) = %q, want %q", tt.in, got, tt.wantErr)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"name", "task", "tools", "max_turns", "max_retries"}
	tests := []struct{ in, want string }{
		{"taks", "task"},
		{"Task", "task"},
		{"tool", "tools"},
		{"max_turn", "max_turns"},
		{"max_retires", "max_retries"},
		{"max_retry", ""}, // three edits away
		{"prompt", ""},
		{"t", ""},  // one letter is not a near miss of anything
		{"ab", ""}, // nor is a distance as long as the key
	}
	for _, tt := range tests {
		if got := suggest(tt.in, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
