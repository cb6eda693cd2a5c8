package sim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// A schema whose answers are long enough to take several decode steps.
const longSchema = `{"type":"object","properties":{"text":{"type":"string","minLength":120}},"required":["text"]}`

// decode is the nominal decode time of a response.
func decode(perToken time.Duration, u llm.Usage) time.Duration {
	return time.Duration(u.CompletionTokens-1) * perToken
}

func TestGenerateTiming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  sim.Config
		req  *llm.Request
	}{
		{"latency only", sim.Config{Latency: 60 * time.Millisecond}, answerRequest("x", longSchema)},
		{"one token", sim.Config{Latency: 60 * time.Millisecond, PerToken: 5 * time.Millisecond}, answerRequest("x", `{"const":1}`)},
		{"per token", sim.Config{Latency: 60 * time.Millisecond, PerToken: 5 * time.Millisecond}, answerRequest("x", longSchema)},
		{"per token only", sim.Config{PerToken: time.Millisecond}, answerRequest("x", longSchema)},
		{"tool calls", sim.Config{Latency: 30 * time.Millisecond, PerToken: 2 * time.Millisecond}, &llm.Request{Messages: user("path: a.go"), Tools: []llm.ToolDef{readFileTool, grepTool}}},
		{"instant", sim.Config{}, answerRequest("x", longSchema)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newModel(t, tt.cfg)
				start := time.Now()
				resp := generate(t, t.Context(), m, tt.req)
				got := time.Since(start)
				want := tt.cfg.Latency + decode(tt.cfg.PerToken, resp.Usage)
				if got != want {
					t.Errorf("Generate took %v, want %v (latency %v + (%d tokens - 1) × %v)", got, want, tt.cfg.Latency, resp.Usage.CompletionTokens, tt.cfg.PerToken)
				}
				if tt.cfg.PerToken > 0 && tt.name != "one token" && got-tt.cfg.Latency < 10*tt.cfg.PerToken {
					t.Errorf("decode took %v, want at least 10 tokens' time", got-tt.cfg.Latency)
				}
			})
		})
	}
}

func TestFailureTiming(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// An overloaded server answers after one forward pass.
		m := newModel(t, sim.Config{Latency: 40 * time.Millisecond, PerToken: time.Millisecond, FailRate: 1})
		start := time.Now()
		_, err := m.Generate(t.Context(), answerRequest("x", longSchema))
		if got := time.Since(start); !errors.Is(err, llm.ErrOverloaded) || got != 40*time.Millisecond {
			t.Errorf("Generate = %v after %v, want llm.ErrOverloaded after 40ms", err, got)
		}
		start = time.Now()
		for _, err := range m.Stream(t.Context(), answerRequest("x", longSchema)) {
			if got := time.Since(start); !errors.Is(err, llm.ErrOverloaded) || got != 40*time.Millisecond {
				t.Errorf("Stream = %v after %v, want llm.ErrOverloaded after 40ms", err, got)
			}
		}
	})
}

func TestGenerateCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      sim.Config
		cancelAt time.Duration
	}{
		{"during forward pass", sim.Config{Latency: 60 * time.Millisecond}, 25 * time.Millisecond},
		{"during decode", sim.Config{Latency: 10 * time.Millisecond, PerToken: 10 * time.Millisecond}, 30 * time.Millisecond},
		{"before the call", sim.Config{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newModel(t, tt.cfg)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tt.cancelAt == 0 {
					cancel()
				} else {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				start := time.Now()
				resp, err := m.Generate(ctx, answerRequest("x", longSchema))
				if got := time.Since(start); !errors.Is(err, context.Canceled) || resp != nil || got != tt.cancelAt {
					t.Errorf("Generate = %v, %v after %v, want context.Canceled after %v", resp, err, got, tt.cancelAt)
				}
				if llm.IsTransient(err) {
					t.Errorf("IsTransient(%v) = true, want false", err)
				}
			})
		})
	}
}

type timedEvent struct {
	at  time.Duration
	ev  llm.Event
	err error
}

func streamTimed(ctx context.Context, m *sim.Model, req *llm.Request) []timedEvent {
	var out []timedEvent
	start := time.Now()
	for ev, err := range m.Stream(ctx, req) {
		out = append(out, timedEvent{time.Since(start), ev, err})
	}
	return out
}

func TestStreamTiming(t *testing.T) {
	t.Parallel()
	cfg := sim.Config{Latency: 60 * time.Millisecond, PerToken: 5 * time.Millisecond}
	tests := []struct {
		name string
		req  *llm.Request
	}{
		{"answer", answerRequest("x", longSchema)},
		{"tool calls", &llm.Request{Messages: user("path: a.go"), Tools: []llm.ToolDef{readFileTool, grepTool}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				events := streamTimed(t.Context(), newModel(t, cfg), tt.req)
				last := events[len(events)-1]
				if last.ev.Type != llm.EventDone {
					t.Fatalf("last event %+v, want EventDone", last.ev)
				}
				var usage llm.Usage
				for _, e := range events {
					if e.err != nil {
						t.Fatalf("Stream event error %v", e.err)
					}
					if e.ev.Type == llm.EventUsage {
						usage = e.ev.Usage
					}
				}
				end := cfg.Latency + decode(cfg.PerToken, usage)
				if events[0].at != cfg.Latency {
					t.Errorf("first event at %v, want %v", events[0].at, cfg.Latency)
				}
				if last.at != end {
					t.Errorf("last event at %v, want %v", last.at, end)
				}
				// Text comes as it is decoded: each piece when its last
				// token is, the first token after the forward pass. A
				// tool call's name comes with the first token, its
				// arguments after decoding, like the end of the stream.
				var text, pieces int
				for _, e := range events {
					want := end
					switch {
					case e.ev.Type == llm.EventText:
						text += len(e.ev.Text)
						pieces++
						want = cfg.Latency + time.Duration(sim.Tokens(text)-1)*cfg.PerToken
						if n := sim.Tokens(len(e.ev.Text)); pieces > 1 && n > sim.StreamPieceTokens {
							t.Errorf("text event %q is %d tokens, want at most %d", e.ev.Text, n, sim.StreamPieceTokens)
						}
					case e.ev.Type == llm.EventToolCall && e.ev.ToolCall.Name != "":
						want = cfg.Latency
					}
					if e.at != want {
						t.Errorf("event %+v at %v, want %v", e.ev, e.at, want)
					}
				}
				// longSchema's answer is over 120 bytes: several pieces.
				if tt.name == "answer" && pieces < 4 {
					t.Errorf("answer in %d text events, want the first token and at least 3 pieces", pieces)
				}
			})
		})
	}
}

func TestStreamCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newModel(t, sim.Config{Latency: 10 * time.Millisecond, PerToken: 10 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(50*time.Millisecond, cancel)
		events := streamTimed(ctx, m, answerRequest("x", longSchema))
		if len(events) != 2 {
			t.Fatalf("Stream yielded %d events %+v, want the first token and an error", len(events), events)
		}
		if e := events[0]; e.err != nil || e.ev.Type != llm.EventText || e.at != 10*time.Millisecond {
			t.Errorf("first event %+v, want text at 10ms", e)
		}
		if e := events[1]; !errors.Is(e.err, context.Canceled) || e.at != 50*time.Millisecond {
			t.Errorf("second event %+v, want context.Canceled at 50ms", e)
		}
	})
}

func TestStreamBreakTiming(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Breaking after the first token does not wait for the decoding.
		m := newModel(t, sim.Config{Latency: 60 * time.Millisecond, PerToken: 5 * time.Millisecond})
		start := time.Now()
		for range m.Stream(t.Context(), answerRequest("x", longSchema)) {
			break
		}
		if got := time.Since(start); got != 60*time.Millisecond {
			t.Errorf("Stream with a break after the first event took %v, want 60ms", got)
		}
	})
}

func TestJitter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := sim.Config{Latency: 100 * time.Millisecond, PerToken: time.Millisecond, Jitter: 0.5, Seed: 4}
		m := newModel(t, cfg)
		lo, hi := 2.0, 0.0
		for i := range 200 {
			start := time.Now()
			resp := generate(t, t.Context(), m, answerRequest(fmt.Sprint(i), longSchema))
			got := time.Since(start)
			nominal := cfg.Latency + decode(cfg.PerToken, resp.Usage)
			// Each part is scaled then truncated to a nanosecond.
			if got < nominal/2-2 || got > nominal*3/2 {
				t.Errorf("call %d took %v, want within [0.5, 1.5] × %v", i, got, nominal)
			}
			r := float64(got) / float64(nominal)
			lo, hi = min(lo, r), max(hi, r)
		}
		if lo > 0.6 || hi < 1.4 {
			t.Errorf("durations spread over [%.2f, %.2f] × nominal, want about [0.5, 1.5]", lo, hi)
		}
	})
}

// TestJitterSameForStream checks that the n-th call of a model takes as
// long whether it is a Generate or a Stream.
func TestJitterSameForStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := sim.Config{Latency: 100 * time.Millisecond, PerToken: time.Millisecond, Jitter: 0.5, Seed: 7}
		gen, str := newModel(t, cfg), newModel(t, cfg)
		for i := range 20 {
			req := answerRequest(fmt.Sprint(i), longSchema)
			start := time.Now()
			generate(t, t.Context(), gen, req)
			want := time.Since(start)
			events := streamTimed(t.Context(), str, req)
			if got := events[len(events)-1].at; got != want {
				t.Errorf("call %d: Stream took %v, Generate %v, want equal", i, got, want)
			}
		}
	})
}

// TestConcurrentTiming checks that calls overlap: the simulator is an
// inference server with unbounded batch size, not a single slot.
func TestConcurrentTiming(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newModel(t, sim.Config{Latency: 60 * time.Millisecond})
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				if _, err := m.Generate(t.Context(), answerRequest(fmt.Sprint(i), longSchema)); err != nil {
					t.Errorf("Generate = %v", err)
				}
			})
		}
		wg.Wait()
		if got := time.Since(start); got != 60*time.Millisecond {
			t.Errorf("100 concurrent calls took %v, want 60ms", got)
		}
	})
}
