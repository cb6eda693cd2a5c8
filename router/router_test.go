package router_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/router"
)

// fakeModel answers its name, fails with err while down is set, and
// blocks while gate is non-nil until it is closed.
type fakeModel struct {
	name  string
	down  atomic.Bool
	err   error         // the failure while down; defaults to a connection failure
	gate  chan struct{} // nil: answer at once
	calls atomic.Int64
	// midStream: the stream fails with a connection failure after its
	// first event.
	midStream bool
	// rateFirst: a down stream reports rate limits before it fails.
	rateFirst bool
}

func (f *fakeModel) fail() error {
	if f.err != nil {
		return f.err
	}
	return &llm.APIError{Backend: f.name, Err: llm.ErrConnection, Message: "connection refused"}
}

func (f *fakeModel) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	f.calls.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.down.Load() {
		return nil, f.fail()
	}
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: f.name}}, nil
}

func (f *fakeModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		f.calls.Add(1)
		if f.down.Load() && !f.midStream {
			if f.rateFirst && !yield(llm.Event{Type: llm.EventRateLimit, RateLimit: &llm.RateLimitInfo{LimitRequests: 1}}, nil) {
				return
			}
			yield(llm.Event{}, f.fail())
			return
		}
		if !yield(llm.Event{Type: llm.EventText, Text: f.name}, nil) {
			return
		}
		if f.midStream {
			yield(llm.Event{}, f.fail())
			return
		}
		yield(llm.Event{Type: llm.EventDone, FinishReason: llm.FinishStop}, nil)
	}
}

func newRouter(t *testing.T, cfg router.Config) *router.Router {
	t.Helper()
	r, err := router.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func statsOf(r *router.Router, name string) router.Stats {
	for _, s := range r.Stats() {
		if s.Name == name {
			return s
		}
	}
	return router.Stats{}
}

// TestFailoverOnConnectionFailure: a call whose deployment cannot be
// reached is answered by the other; the dead one's breaker opens after
// FailureThreshold failures, lets a probe through after Cooldown, and
// closes once the probe is answered.
func TestFailoverOnConnectionFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &fakeModel{name: "a"}, &fakeModel{name: "b"}
		a.down.Store(true)
		r := newRouter(t, router.Config{Cooldown: time.Second, FailureThreshold: 2,
			Deployments: []router.Deployment{{Name: "a", Model: a, Weight: 10}, {Name: "b", Model: b}}})
		for i := range 5 {
			resp, err := r.Generate(t.Context(), &llm.Request{})
			if err != nil || resp.Message.Content != "b" {
				t.Fatalf("call %d: Generate = %v, %v, want b's answer", i, resp, err)
			}
		}
		if st := statsOf(r, "a"); st.State != "open" || st.Failures != 2 || st.Requests != 2 {
			t.Errorf("a: %+v, want open after 2 failures and no call since", st)
		}
		a.down.Store(false)
		time.Sleep(time.Second + time.Millisecond) // the cooldown
		if st := statsOf(r, "a"); st.State != "half-open" {
			t.Errorf("a after its cooldown: %q, want half-open", st.State)
		}
		resp, err := r.Generate(t.Context(), &llm.Request{})
		if err != nil || resp.Message.Content != "a" {
			t.Fatalf("probe: Generate = %v, %v, want a's answer", resp, err)
		}
		if st := statsOf(r, "a"); st.State != "closed" {
			t.Errorf("a after a good probe: %q, want closed", st.State)
		}
	})
}

// TestAllDown: every deployment unreachable is the last one's connection
// failure, each tried once; then, breakers open, a connection failure
// at once without a call.
func TestAllDown(t *testing.T) {
	a, b := &fakeModel{name: "a"}, &fakeModel{name: "b"}
	a.down.Store(true)
	b.down.Store(true)
	r := newRouter(t, router.Config{FailureThreshold: 1, Cooldown: time.Hour,
		Deployments: []router.Deployment{{Model: a}, {Model: b}}})
	_, err := r.Generate(t.Context(), &llm.Request{})
	if !errors.Is(err, llm.ErrConnection) {
		t.Fatalf("Generate = %v, want a connection failure", err)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 {
		t.Errorf("calls a %d, b %d, want 1 each", a.calls.Load(), b.calls.Load())
	}
	_, err = r.Generate(t.Context(), &llm.Request{})
	if !errors.Is(err, llm.ErrConnection) || !strings.Contains(err.Error(), "circuit breakers are open") {
		t.Errorf("Generate with both breakers open = %v, want a connection failure naming the breakers", err)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 {
		t.Errorf("calls a %d, b %d after the breakers opened, want still 1 each", a.calls.Load(), b.calls.Load())
	}
}

// TestNotRetried: a refused request is not sent to another deployment,
// and does not count against the deployment's health.
func TestNotRetried(t *testing.T) {
	a := &fakeModel{name: "a", err: &llm.APIError{Backend: "a", StatusCode: 400, Err: llm.ErrBadRequest}}
	b := &fakeModel{name: "b"}
	a.down.Store(true)
	r := newRouter(t, router.Config{FailureThreshold: 1,
		Deployments: []router.Deployment{{Name: "a", Model: a, Weight: 10}, {Name: "b", Model: b}}})
	_, err := r.Generate(t.Context(), &llm.Request{})
	if !errors.Is(err, llm.ErrBadRequest) {
		t.Fatalf("Generate = %v, want a's bad request", err)
	}
	if b.calls.Load() != 0 {
		t.Errorf("b got %d calls, want 0", b.calls.Load())
	}
	if st := statsOf(r, "a"); st.State != "closed" || st.Failures != 0 {
		t.Errorf("a: %+v, want closed with no failure", st)
	}
}

// TestStreamFailover: a stream that fails to connect starts again on the
// other deployment; one cut after its first event is not restarted.
func TestStreamFailover(t *testing.T) {
	tests := []struct {
		name      string
		midStream bool
		rateFirst bool
		want      string
		wantErr   bool
	}{
		{"before the first event", false, false, "b", false},
		{"after a rate-limit report only", false, true, "b", false},
		{"after the first event", true, false, "a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := &fakeModel{name: "a", midStream: tt.midStream, rateFirst: tt.rateFirst}, &fakeModel{name: "b"}
			a.down.Store(true)
			r := newRouter(t, router.Config{Deployments: []router.Deployment{{Model: a, Weight: 10}, {Model: b}}})
			if !r.Capabilities().Streaming {
				t.Error("Capabilities().Streaming = false, want true: both stream")
			}
			var text string
			var gotErr error
			for ev, err := range r.Stream(t.Context(), &llm.Request{}) {
				if err != nil {
					gotErr = err
					break
				}
				text += ev.Text
			}
			if text != tt.want || (gotErr != nil) != tt.wantErr {
				t.Errorf("Stream = %q, %v; want %q, error %v", text, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}

// TestLeastLoaded: calls fill the deployments by in-flight ÷ limit; one
// more waits for a slot, and gives up with its context.
func TestLeastLoaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		a, b := &fakeModel{name: "a", gate: gate}, &fakeModel{name: "b", gate: gate}
		r := newRouter(t, router.Config{Deployments: []router.Deployment{
			{Name: "a", Model: a, MaxInflight: 4}, {Name: "b", Model: b, MaxInflight: 2}}})
		if got := r.MaxInflight(); got != 6 {
			t.Errorf("MaxInflight() = %d, want 6", got)
		}
		for range 6 {
			go func() { _, _ = r.Generate(context.Background(), &llm.Request{}) }()
		}
		synctest.Wait()
		if a.calls.Load() != 4 || b.calls.Load() != 2 {
			t.Errorf("in flight a %d, b %d, want 4 and 2", a.calls.Load(), b.calls.Load())
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := r.Generate(ctx, &llm.Request{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Generate with every slot taken = %v, want the context's deadline", err)
		}
		close(gate)
		synctest.Wait()
		if st := statsOf(r, "a"); st.Inflight != 0 || st.Requests != 4 {
			t.Errorf("a: %+v, want 4 calls, none in flight", st)
		}
	})
}

// TestRateLimitedHalves: a deployment that answers rate-limited halves
// its in-flight limit; a fixed one keeps it.
func TestRateLimitedHalves(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		a := &fakeModel{name: "a", err: &llm.APIError{Backend: "a", StatusCode: 429, Err: llm.ErrRateLimited}}
		a.down.Store(true)
		r := newRouter(t, router.Config{Deployments: []router.Deployment{{Name: "a", Model: a, MaxInflight: 8, FixedInflight: fixed}}})
		_, _ = r.Generate(t.Context(), &llm.Request{})
		want := 4
		if fixed {
			want = 8
		}
		if st := statsOf(r, "a"); st.Limit != want || st.State != "closed" {
			t.Errorf("fixed %v: %+v, want limit %d, breaker closed", fixed, st, want)
		}
	}
}

// TestNewErrors: a config without deployments, or with a bad one, is
// refused with a message naming it.
func TestNewErrors(t *testing.T) {
	m := &fakeModel{name: "m"}
	tests := []struct {
		name string
		cfg  router.Config
		want string
	}{
		{"none", router.Config{}, "no deployments"},
		{"no model", router.Config{Deployments: []router.Deployment{{Name: "x"}}}, "deployments[0] (x): no model"},
		{"negative weight", router.Config{Deployments: []router.Deployment{{Model: m, Weight: -1}}}, "deployments[0] (d0): weight"},
		{"duplicate", router.Config{Deployments: []router.Deployment{{Name: "x", Model: m}, {Name: "x", Model: m}}}, `name "x" used twice`},
		{"negative cooldown", router.Config{Cooldown: -1, Deployments: []router.Deployment{{Model: m}}}, "negative cooldown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := router.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
