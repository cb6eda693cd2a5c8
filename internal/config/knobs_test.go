package config_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/httptool"
	"github.com/batchagent/batchagent/tool/mcptool"
)

// knobsJob sets every engine knob that has a job-file key beyond the
// basics: sampling, back-off, the queue probe, the tool pool and the tool
// options that map to library settings.
const knobsJob = `task: "Label {text}"
max_tokens: 512
context_window: 8192
temperature: 0
top_p: 0.9
seed: 42
stop: ["END", "\n\n"]
limits:
  backoff:
    base: 100ms
    rate_limit_base: 2s
    max: 1m
  probe_interval: 500ms
tool_pool:
  cache_size: off
  cache_ttl: 30s
  max_result_bytes: 4096
  timeout: 5s
tools:
  - name: http_get
    allow_hosts: [example.com]
    max_redirects: off
mcp:
  - name: files
    url: http://127.0.0.1:1/mcp
    connect_timeout: 3s
`

func TestParseKnobs(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte(knobsJob), "job.yaml", "/jobs")
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	backoff := job.Backoff{Base: 100 * time.Millisecond, RateLimitBase: 2 * time.Second, Max: time.Minute}
	want := &config.Job{
		Def: job.Def{
			Task:          "Label {text}",
			MaxTokens:     512,
			ContextWindow: 8192,
			Temperature:   new(0.0),
			TopP:          new(0.9),
			Seed:          new(int64(42)),
			Stop:          []string{"END", "\n\n"},
			Backoff:       backoff,
			ToolPool: tool.PoolConfig{
				CacheSize:      -1,
				CacheTTL:       30 * time.Second,
				MaxResultBytes: 4096,
				Timeout:        5 * time.Second,
			},
		},
		Engine: batchagent.Config{Admission: batchagent.Admission{
			Backpressure: batchagent.Backpressure{Interval: 500 * time.Millisecond},
			PauseBackoff: backoff, // limits.backoff spaces the pauses after connection failures too
		}},
		Backend: config.DefaultBackend,
		Tools:   []config.Tool{{Name: "http_get", Settings: &httptool.Config{AllowHosts: []string{"example.com"}, MaxRedirects: -1, Cacheable: true}}},
		MCP:     []config.MCPServer{{Server: mcptool.ServerConfig{Name: "files", URL: "http://127.0.0.1:1/mcp", ConnectTimeout: 3 * time.Second}}},
		Dir:     "/jobs",
		Path:    "job.yaml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
}

func TestParseKnobProblems(t *testing.T) {
	t.Parallel()
	runProblemCases(t, t.TempDir(), []problemCase{
		{
			name: "sampling out of range",
			in:   "task: x\nmax_tokens: -1\nmax_tokens_limit: -2\ntemperature: -0.5\ntop_p: 1.5\nseed: 1.5\nstop: [a, '']\n",
			want: []config.Problem{
				{Line: 2, Col: 13, Path: "max_tokens", Msg: "must not be negative, got -1"},
				{Line: 3, Col: 19, Path: "max_tokens_limit", Msg: "must not be negative, got -2"},
				{Line: 4, Col: 14, Path: "temperature", Msg: "must be a number from 0 up, got -0.5"},
				{Line: 5, Col: 8, Path: "top_p", Msg: "must be a number from 0 to 1, got 1.5"},
				{Line: 6, Col: 7, Path: "seed", Msg: "expected an integer, got 1.5"},
				{Line: 7, Col: 11, Path: "stop[1]", Msg: "must not be empty"},
			},
		},
		{
			name: "token limit below the cap",
			in:   "task: x\nmax_tokens: 512\nmax_tokens_limit: 256\n",
			want: []config.Problem{
				{Line: 3, Col: 19, Path: "max_tokens_limit", Msg: "must be at least max_tokens (512), got 256"},
			},
		},
		{
			name: "token limit below the default cap",
			in:   "task: x\nmax_tokens_limit: 1000\n",
			want: []config.Problem{
				{Line: 2, Col: 19, Path: "max_tokens_limit", Msg: "must be at least max_tokens (the default 4096), got 1000"},
			},
		},
		{
			name: "context window negative",
			in:   "task: x\ncontext_window: -1\n",
			want: []config.Problem{
				{Line: 2, Col: 17, Path: "context_window", Msg: "must not be negative, got -1"},
			},
		},
		{
			name: "context window not above the default cap",
			in:   "task: x\ncontext_window: 4096\n",
			want: []config.Problem{
				{Line: 2, Col: 17, Path: "context_window", Msg: "must be above max_tokens (the default 4096), got 4096"},
			},
		},
		{
			name: "not a number",
			in:   "task: x\ntemperature: .nan\ntop_p: hot\nstop: END\n",
			want: []config.Problem{
				{Line: 2, Col: 14, Path: "temperature", Msg: "must be a number from 0 up, got NaN"},
				{Line: 3, Col: 8, Path: "top_p", Msg: "cannot unmarshal !!str `hot` into float64"},
				{Line: 4, Col: 7, Path: "stop", Msg: `expected a list, got "END"`},
			},
		},
		{
			name: "back-off",
			in:   "task: x\nlimits:\n  backoff:\n    base: 2m\n    rate_limit_base: -1s\n    max: 1m\n    maximum: 3s\n  probe_interval: 5\n",
			want: []config.Problem{
				{Line: 4, Col: 11, Path: "limits.backoff.base", Msg: "must not exceed limits.backoff.max (1m0s), got 2m0s"},
				{Line: 5, Col: 22, Path: "limits.backoff.rate_limit_base", Msg: "must not be negative, got -1s"},
				{Line: 7, Col: 5, Path: "limits.backoff.maximum", Msg: `unknown key "maximum"`},
				{Line: 8, Col: 19, Path: "limits.probe_interval", Msg: `invalid duration 5: want a duration like "30s"`},
			},
		},
		{
			name: "tool pool",
			in:   "task: x\ntool_pool:\n  cache_size: -2\n  cache_ttl: -1m\n  max_result_bytes: -5\n  timeout: 1h\n  cache_sise: 3\n",
			want: []config.Problem{
				{Line: 3, Col: 15, Path: "tool_pool.cache_size", Msg: "must be off or not negative (-1, deprecated, means off too), got -2"},
				{Line: 4, Col: 14, Path: "tool_pool.cache_ttl", Msg: "must not be negative, got -1m0s"},
				{Line: 5, Col: 21, Path: "tool_pool.max_result_bytes", Msg: "must be off or not negative (-1, deprecated, means off too), got -5"},
				{Line: 7, Col: 3, Path: "tool_pool.cache_sise", Msg: `unknown key "cache_sise" (did you mean "cache_size"?)`},
			},
		},
		{
			name: "tool options",
			in:   "task: x\ntools:\n  - name: http_get\n    max_redirects: -3\n  - name: list_dir\n    roots: [.]\n    max_redirects: 2\nmcp:\n  - name: m\n    url: http://h/mcp\n    connect_timeout: -1s\n",
			want: []config.Problem{
				{Line: 4, Col: 20, Path: "tools[0].max_redirects", Msg: "must be off or not negative (-1, deprecated, means off too), got -3"},
				{Line: 7, Col: 20, Path: "tools[1].max_redirects", Msg: `tool "list_dir" does not take max_redirects`},
				{Line: 11, Col: 22, Path: "mcp[0].connect_timeout", Msg: "must not be negative, got -1s"},
			},
		},
	})
}
