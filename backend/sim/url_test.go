package sim_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/media"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		want    sim.Config
		wantErr string // a substring of the error; empty means no error
	}{
		{name: "defaults", url: "sim://", want: sim.Config{}},
		{name: "empty query", url: "sim://?", want: sim.Config{}},
		{name: "no slashes", url: "sim:?seed=4", want: sim.Config{Seed: 4}},
		{
			name: "every parameter",
			url:  "sim://?latency=60ms&per_token=2ms&jitter=0.25&fail=0.02&invalid=0.1&corrupt=0.05&tool_turns=3&tools=read_file,grep&seed=42",
			want: sim.Config{
				Latency: 60 * time.Millisecond, PerToken: 2 * time.Millisecond, Jitter: 0.25,
				FailRate: 0.02, InvalidRate: 0.1, CorruptRate: 0.05, ToolTurns: 3, Tools: []string{"read_file", "grep"}, Seed: 42,
			},
		},
		{name: "tool_turns=0 never calls tools", url: "sim://?tool_turns=0", want: sim.Config{ToolTurns: -1}},
		{name: "negative tool_turns", url: "sim://?tool_turns=-2", want: sim.Config{ToolTurns: -2}},
		{name: "tools trimmed", url: "sim://?tools=%20a%20,,b,", want: sim.Config{Tools: []string{"a", "b"}}},
		{name: "empty tools", url: "sim://?tools=", want: sim.Config{}},
		{name: "last value wins", url: "sim://?seed=1&seed=2", want: sim.Config{Seed: 2}},
		{name: "model", url: "sim://?model=sim-7b&seed=3", want: sim.Config{Model: "sim-7b", Seed: 3}},
		{name: "probability bounds", url: "sim://?jitter=1&fail=0&invalid=1&corrupt=1", want: sim.Config{Jitter: 1, InvalidRate: 1, CorruptRate: 1}},
		{name: "zero durations", url: "sim://?latency=0s&per_token=0", want: sim.Config{}},
		{name: "media_tokens", url: "sim://?media_tokens=anthropic", want: sim.Config{MediaTokens: media.BillingAnthropic}},
		{name: "bad media_tokens", url: "sim://?media_tokens=gemini", wantErr: `parameter media_tokens: media: unknown billing "gemini"`},
		{name: "max seed", url: "sim://?seed=18446744073709551615", want: sim.Config{Seed: math.MaxUint64}},

		{name: "unknown parameter", url: "sim://?latncy=60ms", wantErr: `unknown parameter "latncy"`},
		{name: "wrong scheme", url: "http://localhost?seed=1", wantErr: `scheme "http"`},
		{name: "no scheme", url: "?seed=1", wantErr: `scheme ""`},
		{name: "not a URL", url: "sim://%zz", wantErr: "sim: "},
		{name: "bad query escape", url: "sim://?seed=%zz", wantErr: "sim: "},
		{name: "bad latency", url: "sim://?latency=fast", wantErr: "parameter latency"},
		{name: "latency without unit", url: "sim://?latency=60", wantErr: "parameter latency"},
		{name: "negative latency", url: "sim://?latency=-1ms", wantErr: "latency"},
		{name: "bad per_token", url: "sim://?per_token=x", wantErr: "parameter per_token"},
		{name: "negative per_token", url: "sim://?per_token=-1ms", wantErr: "per_token"},
		{name: "bad jitter", url: "sim://?jitter=lots", wantErr: "parameter jitter"},
		{name: "jitter above 1", url: "sim://?jitter=1.5", wantErr: "jitter"},
		{name: "fail above 1", url: "sim://?fail=2", wantErr: "fail"},
		{name: "fail NaN", url: "sim://?fail=NaN", wantErr: "fail"},
		{name: "fail infinite", url: "sim://?fail=Inf", wantErr: "fail"},
		{name: "negative invalid", url: "sim://?invalid=-0.1", wantErr: "invalid"},
		{name: "corrupt above 1", url: "sim://?corrupt=2", wantErr: "corrupt"},
		{name: "bad corrupt", url: "sim://?corrupt=often", wantErr: "parameter corrupt"},
		{name: "bad tool_turns", url: "sim://?tool_turns=two", wantErr: "parameter tool_turns"},
		{name: "fractional tool_turns", url: "sim://?tool_turns=1.5", wantErr: "parameter tool_turns"},
		{name: "negative seed", url: "sim://?seed=-1", wantErr: "parameter seed"},
		{name: "seed overflow", url: "sim://?seed=18446744073709551616", wantErr: "parameter seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := sim.ParseURL(tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v, want an error containing %q", tt.url, got, err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "sim: ") {
					t.Errorf("ParseURL(%q) error = %q, want the prefix \"sim: \"", tt.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q) = %v, want no error", tt.url, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) mismatch (-want +got):\n%s", tt.url, diff)
			}
			if _, err := sim.New(got); err != nil {
				t.Errorf("sim.New(ParseURL(%q)) = %v, want no error", tt.url, err)
			}
		})
	}
}

// TestParseURLErrorStable checks that a URL with several bad parameters
// always reports the same one.
func TestParseURLErrorStable(t *testing.T) {
	t.Parallel()
	const url = "sim://?zeta=1&fail=9&alpha=2&latency=x&seed=-3"
	_, first := sim.ParseURL(url)
	if first == nil {
		t.Fatalf("ParseURL(%q) = nil error, want one", url)
	}
	for range 20 {
		if _, err := sim.ParseURL(url); err == nil || err.Error() != first.Error() {
			t.Fatalf("ParseURL(%q) = %v, earlier %v, want the same error every time", url, err, first)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     sim.Config
		wantErr string
	}{
		{name: "zero", cfg: sim.Config{}},
		{name: "bounds", cfg: sim.Config{Jitter: 1, FailRate: 1, InvalidRate: 1, CorruptRate: 1, ToolTurns: -1}},
		{name: "negative latency", cfg: sim.Config{Latency: -time.Millisecond}, wantErr: "latency"},
		{name: "negative per token", cfg: sim.Config{PerToken: -time.Millisecond}, wantErr: "per_token"},
		{name: "jitter above 1", cfg: sim.Config{Jitter: 1.01}, wantErr: "jitter"},
		{name: "jitter NaN", cfg: sim.Config{Jitter: math.NaN()}, wantErr: "jitter"},
		{name: "negative fail", cfg: sim.Config{FailRate: -0.5}, wantErr: "fail"},
		{name: "fail NaN", cfg: sim.Config{FailRate: math.NaN()}, wantErr: "fail"},
		{name: "invalid above 1", cfg: sim.Config{InvalidRate: 2}, wantErr: "invalid"},
		{name: "invalid infinite", cfg: sim.Config{InvalidRate: math.Inf(1)}, wantErr: "invalid"},
		{name: "negative corrupt", cfg: sim.Config{CorruptRate: -0.1}, wantErr: "corrupt"},
		{name: "corrupt NaN", cfg: sim.Config{CorruptRate: math.NaN()}, wantErr: "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := sim.New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("sim.New(%+v) = %v, %v, want a model", tt.cfg, m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("sim.New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.wantErr)
			}
			if m != nil {
				t.Errorf("sim.New(%+v) returned a model with its error", tt.cfg)
			}
		})
	}
}
