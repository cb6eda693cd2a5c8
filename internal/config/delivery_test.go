package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/internal/config"
)

func TestParseDelivery(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       *config.DeliveryConfig
	}{
		{"absent", ``, nil},
		{"batch", "delivery: batch\n", &config.DeliveryConfig{Batch: true}},
		{"realtime", "delivery: realtime\n", &config.DeliveryConfig{}},
		{"mapping", "delivery: {mode: batch, linger: 30s, poll_every: 1m, min_lines: 500, max_enqueued_tokens: 2000000}\n",
			&config.DeliveryConfig{Batch: true, Linger: 30 * time.Second, PollEvery: time.Minute, MinLines: 500, MaxEnqueuedTokens: 2_000_000}},
		{"mode alone", "delivery: {mode: batch}\n", &config.DeliveryConfig{Batch: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j, err := config.Parse([]byte("task: hi\n"+c.yaml), "job.yaml", dir)
			if err != nil {
				t.Fatal(err)
			}
			if (j.Delivery == nil) != (c.want == nil) || j.Delivery != nil && *j.Delivery != *c.want {
				t.Fatalf("Delivery = %+v, want %+v", j.Delivery, c.want)
			}
			if got := j.BatchDelivery("sim://"); got != (c.want != nil && c.want.Batch) {
				t.Errorf("BatchDelivery = %v", got)
			}
			out, err := yaml.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			back, err := config.Parse(out, "job.yaml", dir)
			if err != nil {
				t.Fatalf("%s\nparses back with error %v", out, err)
			}
			if (back.Delivery == nil) != (c.want == nil) || back.Delivery != nil && *back.Delivery != *c.want {
				t.Errorf("written as\n%s\nreads back as %+v, want %+v", out, back.Delivery, c.want)
			}
		})
	}
}

func TestParseDeliveryErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"delivery: fast\n", "delivery: expected batch or realtime"},
		{"delivery: [batch]\n", "delivery: expected batch, realtime or a mapping"},
		{"delivery: {linger: 1s}\n", "delivery: expected a mode"},
		{"delivery: {mode: later}\n", "delivery.mode: expected batch or realtime"},
		{"delivery: {mode: batch, linger: -1s}\n", "delivery.linger: must not be negative"},
		{"delivery: {mode: batch, min_lines: -3}\n", "delivery.min_lines: must not be negative"},
		{"delivery: {mode: batch, window: 1h}\n", "window"},
		{"delivery: {mode: realtime, linger: 1s}\n", "mode is realtime"},
	} {
		_, err := config.Parse([]byte("task: hi\n"+c.yaml), "job.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
}

func TestBatchURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		"openai://?mode=batch":                    true,
		"  anthropic://?mode=batch  ":             true,
		"openai://":                               false,
		"sim+http://127.0.0.1:1/v1?mode=realtime": false,
		"%zz": false,
	} {
		if got := config.BatchURL(raw); got != want {
			t.Errorf("BatchURL(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestOpenBackendDelivery(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "sk-test" }
	batch := &config.DeliveryConfig{Batch: true}
	for _, c := range []struct {
		url  string
		o    config.BackendOptions
		want string // "" for a batch Model; else part of the error
	}{
		{"openai://?mode=batch", config.BackendOptions{}, ""},
		{"openai://", config.BackendOptions{Delivery: batch}, ""},
		{"anthropic://", config.BackendOptions{Delivery: batch}, ""},
		{"sim+http://127.0.0.1:9/v1", config.BackendOptions{Delivery: batch}, ""},
		{"sim://", config.BackendOptions{Delivery: batch}, "sim:// has no batch API"},
		{"vllm://127.0.0.1:8000", config.BackendOptions{Delivery: batch}, "vllm:// has no batch API"},
		{"bedrock://us-east-1", config.BackendOptions{Delivery: batch}, "bedrock:// has no batch API"},
		{"openai://?mode=batch", config.BackendOptions{Delivery: &config.DeliveryConfig{}}, "mode=batch"},
	} {
		m, err := config.OpenBackendWith(context.Background(), c.url, "gpt-4o-mini", "", env, c.o)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %+v: %v", c.url, c.o.Delivery, err)
		case c.want == "":
			bm, ok := m.(*batchmode.Model)
			if !ok {
				t.Errorf("%s: Model %T, want *batchmode.Model", c.url, m)
				continue
			}
			if caps := bm.Capabilities(); !caps.NativeTools || caps.Streaming {
				t.Errorf("%s: capabilities %+v, want the real-time client's without streaming", c.url, caps)
			}
			_ = bm.Close()
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s %+v: error %v, want one containing %q", c.url, c.o.Delivery, err, c.want)
		}
	}
	_, err := config.OpenFallbacks(context.Background(), []config.FallbackBackend{{Backend: "openai://?mode=batch", Model: "gpt-4o-mini"}}, env)
	if err == nil || !strings.Contains(err.Error(), "not a fallback tier") {
		t.Errorf("a fallback tier with mode=batch: %v", err)
	}
}
