package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
)

// named returns a tool with the given spec that answers "ok".
func named(spec tool.Spec) tool.Tool {
	return tool.Func(spec, func(ctx context.Context, args json.RawMessage) (string, error) { return "ok", nil })
}

func TestNewPoolErrors(t *testing.T) {
	tests := []struct {
		name  string
		tools []tool.Tool
		cfg   tool.PoolConfig
		want  []string // substrings of the error, one per problem
	}{
		{name: "nil tool", tools: []tool.Tool{nil}, want: []string{"tool: tools[0] is nil"}},
		{name: "empty name", tools: []tool.Tool{named(tool.Spec{})}, want: []string{`tool: invalid tool name "": want 1 to 64 characters from [a-zA-Z0-9_-]`}},
		{name: "space in name", tools: []tool.Tool{named(tool.Spec{Name: "read file"})}, want: []string{`invalid tool name "read file"`}},
		{name: "dot in name", tools: []tool.Tool{named(tool.Spec{Name: "fs.read"})}, want: []string{`invalid tool name "fs.read"`}},
		{name: "name too long", tools: []tool.Tool{named(tool.Spec{Name: strings.Repeat("a", 65)})}, want: []string{"invalid tool name"}},
		{name: "duplicate", tools: []tool.Tool{named(tool.Spec{Name: "a"}), named(tool.Spec{Name: "a"})}, want: []string{`tool: duplicate tool name "a"`}},
		{name: "parameters array", tools: []tool.Tool{named(tool.Spec{Name: "a", Parameters: json.RawMessage(`[]`)})}, want: []string{"tool a: Parameters must be a JSON Schema object"}},
		{name: "parameters null", tools: []tool.Tool{named(tool.Spec{Name: "a", Parameters: json.RawMessage(`null`)})}, want: []string{"tool a: Parameters must be a JSON Schema object"}},
		{name: "parameters malformed", tools: []tool.Tool{named(tool.Spec{Name: "a", Parameters: json.RawMessage(`{"type":`)})}, want: []string{"tool a: Parameters must be a JSON Schema object"}},
		{name: "negative TTL", cfg: tool.PoolConfig{CacheTTL: -time.Second}, want: []string{"tool: negative CacheTTL -1s"}},
		{name: "negative timeout", cfg: tool.PoolConfig{Timeout: -time.Second}, want: []string{"tool: negative Timeout -1s"}},
		{
			name:  "every problem",
			tools: []tool.Tool{named(tool.Spec{Name: "a"}), named(tool.Spec{Name: "a"}), named(tool.Spec{Name: "b c"})},
			cfg:   tool.PoolConfig{Timeout: -1},
			want:  []string{"negative Timeout", `duplicate tool name "a"`, `invalid tool name "b c"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tool.NewPool(tt.tools, tt.cfg)
			if err == nil {
				t.Fatalf("NewPool() = %v, nil, want an error", p)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("NewPool() error = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestNewPoolValid(t *testing.T) {
	tests := []struct {
		name  string
		tools []tool.Tool
	}{
		{name: "no tools"},
		{name: "name characters", tools: []tool.Tool{named(tool.Spec{Name: "Read_file-2"})}},
		{name: "64-character name", tools: []tool.Tool{named(tool.Spec{Name: strings.Repeat("a", 64)})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := tool.NewPool(tt.tools, tool.PoolConfig{}); err != nil {
				t.Errorf("NewPool() error = %v, want nil", err)
			}
		})
	}
}

func TestPoolSpecs(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	p := newPool(t, tool.PoolConfig{},
		named(tool.Spec{Name: "search", Description: "Search.", Parameters: params, Cacheable: true}),
		named(tool.Spec{Name: "now", Description: "Time."}),
	)
	params[0] = 'X' // the pool kept its own copy
	want := []tool.Spec{
		{Name: "search", Description: "Search.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Cacheable: true},
		{Name: "now", Description: "Time.", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	got := p.Specs()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Specs() mismatch (-want +got):\n%s", diff)
	}
	got[0].Name = "changed"
	got[0].Parameters[0] = 'X'
	if diff := cmp.Diff(want, p.Specs()); diff != "" {
		t.Errorf("Specs() after changing a returned slice (-want +got):\n%s", diff)
	}
}

func TestFuncNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "tool: Func called with a nil function" {
			t.Errorf("Func(spec, nil) panicked with %v, want tool: Func called with a nil function", r)
		}
	}()
	tool.Func(tool.Spec{Name: "x"}, nil)
}

func TestErrorTexts(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{err: &tool.CallError{Tool: "read_file", Err: tool.ErrBadArguments}, want: "tool read_file: tool: bad arguments"},
		{err: &tool.PanicError{Tool: "read_file", Value: "boom"}, want: "tool read_file panicked: boom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, args, want string
	}{
		{"ok", `{"path":"a"}`, ""},
		{"unknown field", `{"path":"a","mode":1}`, `tool: bad arguments: json: unknown field "mode"; want {"path": "<p>"}`},
		{"cut short", `{"path":`, `tool: bad arguments: unexpected EOF; want {"path": "<p>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var a struct {
				Path *string `json:"path"`
			}
			err := tool.DecodeArgs(json.RawMessage(tt.args), &a, `{"path": "<p>"}`)
			if tt.want == "" {
				if err != nil || a.Path == nil || *a.Path != "a" {
					t.Fatalf("DecodeArgs(%s) = %v, path %v; want nil, \"a\"", tt.args, err, a.Path)
				}
				return
			}
			if !errors.Is(err, tool.ErrBadArguments) || err.Error() != tt.want {
				t.Fatalf("DecodeArgs(%s) = %v, want %q wrapping ErrBadArguments", tt.args, err, tt.want)
			}
		})
	}
}
