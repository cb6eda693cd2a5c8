package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
)

// keyed is a Batcher over an in-memory map: {"key":"K"} answers "v-K". Keys
// starting with "bad" fail on their own; "boom" panics, "short" makes the
// batch return one result too few, "exit" calls runtime.Goexit and "stall"
// blocks until release is closed, whatever the context says.
type keyed struct {
	name      string
	cacheable bool
	start     time.Time
	delay     time.Duration // each batch's duration, cut short by its context
	release   chan struct{} // when set, each batch waits for it or its context

	mu      sync.Mutex // protects batches, at and ctxErrs
	batches [][]string
	at      []time.Duration
	ctxErrs []error
}

func newKeyed(name string, cacheable bool) *keyed {
	return &keyed{name: name, cacheable: cacheable, start: time.Now()}
}

func (k *keyed) Spec() tool.Spec {
	return tool.Spec{
		Name:       k.name,
		Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
		Cacheable:  k.cacheable,
	}
}

func (k *keyed) Call(ctx context.Context, args json.RawMessage) (string, error) {
	r := k.CallBatch(ctx, []json.RawMessage{args})
	return r[0].Content, r[0].Err
}

func (k *keyed) CallBatch(ctx context.Context, args []json.RawMessage) []tool.Result {
	keys := make([]string, len(args))
	for i, a := range args {
		var v struct{ Key string }
		if err := json.Unmarshal(a, &v); err != nil {
			keys[i] = "unparsable " + string(a)
			continue
		}
		keys[i] = v.Key
	}
	k.mu.Lock()
	k.batches = append(k.batches, keys)
	k.at = append(k.at, time.Since(k.start))
	k.mu.Unlock()

	if slices.Contains(keys, "stall") {
		<-k.release
	}
	var ctxErr error
	switch {
	case k.release != nil:
		select {
		case <-k.release:
		case <-ctx.Done():
			ctxErr = ctx.Err()
		}
	case k.delay > 0:
		t := time.NewTimer(k.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			ctxErr = ctx.Err()
		}
	}
	k.mu.Lock()
	k.ctxErrs = append(k.ctxErrs, ctxErr)
	k.mu.Unlock()

	results := make([]tool.Result, len(keys))
	for i, key := range keys {
		switch {
		case key == "boom":
			panic("boom in batch")
		case key == "exit":
			runtime.Goexit()
		case ctxErr != nil:
			results[i].Err = ctxErr
		case strings.HasPrefix(key, "bad"):
			results[i].Err = fmt.Errorf("no such key %q", key)
		default:
			results[i].Content = "v-" + key
		}
	}
	if slices.Contains(keys, "short") {
		results = results[1:]
	}
	return results
}

// seen returns each batch's keys, sorted within the batch, and the time it
// began.
func (k *keyed) seen() (batches [][]string, at []time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range k.batches {
		batches = append(batches, slices.Sorted(slices.Values(b)))
	}
	return batches, append([]time.Duration(nil), k.at...)
}

func (k *keyed) contextErrors() []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]error(nil), k.ctxErrs...)
}

// lookupArgs returns the arguments for key.
func lookupArgs(key string) string { return fmt.Sprintf(`{"key":%q}`, key) }

// lookupAll starts a call of name for each key, all at once.
func lookupAll(ctx context.Context, p *tool.Pool, name string, keys ...string) []<-chan callResult {
	chans := make([]<-chan callResult, len(keys))
	for i, key := range keys {
		chans[i] = goCall(ctx, p, name, lookupArgs(key))
	}
	return chans
}

// wantValues checks that each caller received "v-KEY".
func wantValues(t *testing.T, keys []string, chans []<-chan callResult) {
	t.Helper()
	for i, ch := range chans {
		if r := <-ch; r.res != "v-"+keys[i] || r.err != nil {
			t.Errorf("Call(%s) = %q, %v, want %q, nil", keys[i], r.res, r.err, "v-"+keys[i])
		}
	}
}

func TestBatchWindow(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
		want   time.Duration // when the first batch runs
	}{
		{name: "default", want: tool.DefaultBatchWindow},
		{name: "10ms", window: 10 * time.Millisecond, want: 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyed("lookup", false)
				p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"lookup": {BatchWindow: tt.window}}}, k)
				// Identical calls are coalesced before batching; formatting
				// does not matter.
				keys := []string{"k1", "k2", "k3", "k1"}
				chans := lookupAll(t.Context(), p, "lookup", keys...)
				chans = append(chans, goCall(t.Context(), p, "lookup", `{ "key" : "k2" }`))
				keys = append(keys, "k2")
				wantValues(t, keys, chans)
				if got := time.Since(k.start); got != tt.want {
					t.Errorf("first batch answered at %v, want %v", got, tt.want)
				}
				// A later call opens a new batch.
				wantValues(t, []string{"k4"}, lookupAll(t.Context(), p, "lookup", "k4"))

				batches, at := k.seen()
				if diff := cmp.Diff([][]string{{"k1", "k2", "k3"}, {"k4"}}, batches); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]time.Duration{tt.want, 2 * tt.want}, at); diff != "" {
					t.Errorf("batch start times (-want +got):\n%s", diff)
				}
				want := []tool.Stats{{Name: "lookup", Requested: 6, Executed: 2, Coalesced: 2, Batches: 2}}
				if diff := cmp.Diff(want, p.Stats()); diff != "" {
					t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestBatchMaxTriggersEarly(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		calls int
		want  []string // "size@start", sorted
	}{
		{name: "two full batches and a remainder", max: 3, calls: 7, want: []string{"1@1s", "3@0s", "3@0s"}},
		{name: "exactly full", max: 4, calls: 4, want: []string{"4@0s"}},
		{name: "one call a batch", max: 1, calls: 3, want: []string{"1@0s", "1@0s", "1@0s"}},
		{name: "under the cap", max: 10, calls: 4, want: []string{"4@1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyed("lookup", false)
				p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"lookup": {BatchWindow: time.Second, BatchMax: tt.max}}}, k)
				var keys []string
				for i := range tt.calls {
					keys = append(keys, fmt.Sprintf("k%d", i))
				}
				wantValues(t, keys, lookupAll(t.Context(), p, "lookup", keys...))
				batches, at := k.seen()
				var got []string
				for i, b := range batches {
					got = append(got, fmt.Sprintf("%d@%v", len(b), at[i]))
				}
				slices.Sort(got)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
				n := int64(len(tt.want))
				want := []tool.Stats{{Name: "lookup", Requested: int64(tt.calls), Executed: n, Batches: n}}
				if diff := cmp.Diff(want, p.Stats()); diff != "" {
					t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestBatchFailures(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		// want is each caller's result: "v-…" or "error: …".
		want []string
	}{
		{
			name: "errors stay with their item",
			keys: []string{"k1", "bad1", "k2"},
			want: []string{"v-k1", `error: tool lookup: no such key "bad1"`, "v-k2"},
		},
		{
			name: "panic fails every item",
			keys: []string{"k1", "boom"},
			want: []string{"error: tool lookup: tool lookup panicked: boom in batch", "error: tool lookup: tool lookup panicked: boom in batch"},
		},
		{
			name: "wrong result count fails every item",
			keys: []string{"k1", "short"},
			want: []string{"error: tool lookup: CallBatch returned 1 results for 2 calls", "error: tool lookup: CallBatch returned 1 results for 2 calls"},
		},
		{
			name: "Goexit fails every item",
			keys: []string{"k1", "exit"},
			want: []string{"error: tool lookup: tool function called runtime.Goexit", "error: tool lookup: tool function called runtime.Goexit"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyed("lookup", false)
				p := newPool(t, tool.PoolConfig{}, k)
				var got []string
				for _, ch := range lookupAll(t.Context(), p, "lookup", tt.keys...) {
					r := <-ch
					if r.err != nil {
						var ce *tool.CallError
						if !errors.As(r.err, &ce) || ce.Tool != "lookup" {
							t.Errorf("Call error = %#v, want a *CallError for lookup", r.err)
						}
						got = append(got, "error: "+r.err.Error())
						continue
					}
					got = append(got, r.res)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("results (-want +got):\n%s", diff)
				}
				if batches, _ := k.seen(); len(batches) != 1 {
					t.Errorf("batches = %v, want one", batches)
				}
			})
		})
	}
}

func TestBatchPanicError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, tool.PoolConfig{}, newKeyed("lookup", false))
		_, err := p.Call(t.Context(), "lookup", json.RawMessage(lookupArgs("boom")))
		var pe *tool.PanicError
		if !errors.As(err, &pe) || pe.Tool != "lookup" || pe.Value != "boom in batch" || !strings.Contains(string(pe.Stack), "CallBatch") {
			t.Errorf("Call error = %v, want a *PanicError of lookup with value %q and a stack naming CallBatch", err, "boom in batch")
		}
	})
}

func TestBatchCallerLeaves(t *testing.T) {
	tests := []struct {
		name string
		// leave are the callers (by index into keys) that leave, before
		// the batch runs or, when running is set, while it runs.
		keys    []string
		leave   []int
		running bool
		// wantBatches are the batches that ran; wantCtxErr is the error of
		// the running batch's context when it returned.
		wantBatches [][]string
		wantCtxErr  error
		wantStats   tool.Stats
	}{
		{
			name:        "one leaves before the batch runs",
			keys:        []string{"k1", "k2"},
			leave:       []int{0},
			wantBatches: [][]string{{"k2"}},
			wantStats:   tool.Stats{Requested: 2, Executed: 1, Batches: 1, Errors: 1},
		},
		{
			name:      "all leave before the batch runs",
			keys:      []string{"k1", "k2"},
			leave:     []int{0, 1},
			wantStats: tool.Stats{Requested: 2, Errors: 2},
		},
		{
			name:        "one of two identical calls leaves",
			keys:        []string{"k1", "k1"},
			leave:       []int{0},
			wantBatches: [][]string{{"k1"}},
			wantStats:   tool.Stats{Requested: 2, Executed: 1, Coalesced: 1, Batches: 1, Errors: 1},
		},
		{
			name:        "one leaves a running batch",
			keys:        []string{"k1", "k2"},
			leave:       []int{1},
			running:     true,
			wantBatches: [][]string{{"k1", "k2"}},
			wantStats:   tool.Stats{Requested: 2, Executed: 1, Batches: 1, Errors: 1},
		},
		{
			name:        "all leave a running batch",
			keys:        []string{"k1", "k2"},
			leave:       []int{0, 1},
			running:     true,
			wantBatches: [][]string{{"k1", "k2"}},
			wantCtxErr:  context.Canceled,
			wantStats:   tool.Stats{Requested: 2, Executed: 1, Batches: 1, Errors: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyed("lookup", false)
				k.release = make(chan struct{})
				p := newPool(t, tool.PoolConfig{}, k)
				var (
					chans   []<-chan callResult
					cancels []context.CancelFunc
				)
				for _, key := range tt.keys {
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					cancels = append(cancels, cancel)
					chans = append(chans, goCall(ctx, p, "lookup", lookupArgs(key)))
				}
				synctest.Wait() // every call has joined the batch
				if tt.running {
					time.Sleep(tool.DefaultBatchWindow)
					synctest.Wait() // the batch is running
				}
				for _, i := range tt.leave {
					cancels[i]()
					if r := <-chans[i]; !errors.Is(r.err, context.Canceled) {
						t.Errorf("leaving caller %d: Call error = %v, want context.Canceled", i, r.err)
					}
				}
				time.Sleep(time.Second) // well past the window
				close(k.release)
				for i, ch := range chans {
					if slices.Contains(tt.leave, i) {
						continue
					}
					if r := <-ch; r.res != "v-"+tt.keys[i] || r.err != nil {
						t.Errorf("staying caller %d: Call = %q, %v, want %q, nil", i, r.res, r.err, "v-"+tt.keys[i])
					}
				}
				synctest.Wait() // the batch, if any, has returned
				batches, _ := k.seen()
				if diff := cmp.Diff(tt.wantBatches, batches); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
				if tt.running {
					if diff := cmp.Diff([]error{tt.wantCtxErr}, k.contextErrors(), cmpErrors); diff != "" {
						t.Errorf("batch context errors (-want +got):\n%s", diff)
					}
				}
				tt.wantStats.Name = "lookup"
				if diff := cmp.Diff([]tool.Stats{tt.wantStats}, p.Stats()); diff != "" {
					t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestBatchAfterAllLeftNewCallsStartAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyed("lookup", false)
		p := newPool(t, tool.PoolConfig{}, k)
		ctx, cancel := context.WithCancel(t.Context())
		left := lookupAll(ctx, p, "lookup", "k1")
		synctest.Wait()
		cancel()
		if r := <-left[0]; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("leaving caller: Call error = %v, want context.Canceled", r.err)
		}
		time.Sleep(time.Millisecond) // within the dropped batch's window
		wantValues(t, []string{"k1", "k2"}, lookupAll(t.Context(), p, "lookup", "k1", "k2"))
		batches, at := k.seen()
		if diff := cmp.Diff([][]string{{"k1", "k2"}}, batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]time.Duration{time.Millisecond + tool.DefaultBatchWindow}, at); diff != "" {
			t.Errorf("batch start times (-want +got):\n%s", diff)
		}
	})
}

func TestBatchCachedPerItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyed("lookup", true)
		p := newPool(t, tool.PoolConfig{}, k)
		first := []string{"k1", "k2", "bad1"}
		chans := lookupAll(t.Context(), p, "lookup", first...)
		wantValues(t, first[:2], chans[:2])
		if r := <-chans[2]; r.err == nil {
			t.Fatalf("Call(bad1) error = nil, want one")
		}
		// k1 and k2 come from the cache; bad1 (errors are not cached) and
		// k3 make a new batch.
		second := []string{"k1", "k2", "k3"}
		chans = lookupAll(t.Context(), p, "lookup", append(second, "bad1")...)
		wantValues(t, second, chans[:3])
		<-chans[3]

		batches, _ := k.seen()
		if diff := cmp.Diff([][]string{{"bad1", "k1", "k2"}, {"bad1", "k3"}}, batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		want := []tool.Stats{{Name: "lookup", Requested: 7, Executed: 2, CacheHits: 2, Errors: 2, Batches: 2}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestBatchLimits(t *testing.T) {
	tests := []struct {
		name   string
		policy tool.Policy
		delay  time.Duration
		want   []time.Duration // batch start times
	}{
		{name: "one rate token a batch", policy: tool.Policy{Rate: 1, BatchMax: 2, BatchWindow: time.Minute}, want: []time.Duration{0, time.Second, 2 * time.Second}},
		{name: "one concurrency slot a batch", policy: tool.Policy{MaxConcurrent: 1, BatchMax: 2, BatchWindow: time.Minute}, delay: 3 * time.Second, want: []time.Duration{0, 3 * time.Second, 6 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyed("lookup", false)
				k.delay = tt.delay
				p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"lookup": tt.policy}}, k)
				keys := []string{"a", "b", "c", "d", "e", "f"}
				wantValues(t, keys, lookupAll(t.Context(), p, "lookup", keys...))
				_, at := k.seen()
				slices.Sort(at)
				if diff := cmp.Diff(tt.want, at); diff != "" {
					t.Errorf("batch start times (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestBatchTimeout(t *testing.T) {
	tests := []struct {
		name string
		key  string // "stall" ignores the context
	}{
		{name: "batch honours its context", key: "k1"},
		{name: "batch ignores its context", key: "stall"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyed("lookup", false)
				k.release = make(chan struct{})
				p := newPool(t, tool.PoolConfig{Timeout: time.Minute, Policies: map[string]tool.Policy{"lookup": {Timeout: time.Second}}}, k)
				keys := []string{tt.key, "k2"}
				for i, ch := range lookupAll(t.Context(), p, "lookup", keys...) {
					r := <-ch
					if !errors.Is(r.err, tool.ErrTimeout) || r.err.Error() != "tool lookup: tool: timed out after 1s" {
						t.Errorf("Call(%s) error = %v, want tool lookup: tool: timed out after 1s", keys[i], r.err)
					}
				}
				if got, want := time.Since(k.start), tool.DefaultBatchWindow+time.Second; got != want {
					t.Errorf("callers answered at %v, want %v", got, want)
				}
				close(k.release)
			})
		})
	}
}

func TestBatchNoCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyed("lookup", true)
		p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"lookup": {NoCoalesce: true}}}, k)
		keys := []string{"k1", "k1", "k1"}
		wantValues(t, keys, lookupAll(t.Context(), p, "lookup", keys...))
		batches, _ := k.seen()
		if diff := cmp.Diff([][]string{{"k1", "k1", "k1"}}, batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		want := []tool.Stats{{Name: "lookup", Requested: 3, Executed: 1, Batches: 1}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestBatchKeepsCallerValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		var got any
		b := tool.BatchFunc(tool.Spec{Name: "v"}, func(ctx context.Context, args []json.RawMessage) []tool.Result {
			got = ctx.Value(key{})
			return make([]tool.Result, len(args))
		})
		p := newPool(t, tool.PoolConfig{}, b)
		if _, err := p.Call(context.WithValue(t.Context(), key{}, "trace-1"), "v", nil); err != nil {
			t.Fatal(err)
		}
		if got != "trace-1" {
			t.Errorf("ctx.Value in the batch = %v, want trace-1", got)
		}
	})
}

func TestBatchFunc(t *testing.T) {
	upper := tool.BatchFunc(tool.Spec{Name: "upper"}, func(ctx context.Context, args []json.RawMessage) []tool.Result {
		res := make([]tool.Result, len(args))
		for i, a := range args {
			res[i].Content = strings.ToUpper(string(a))
		}
		return res
	})
	if got := upper.Spec(); got.Name != "upper" {
		t.Errorf("Spec().Name = %q, want upper", got.Name)
	}
	if got, err := upper.Call(t.Context(), json.RawMessage(`{"a":"b"}`)); got != `{"A":"B"}` || err != nil {
		t.Errorf("Call() = %q, %v, want %q, nil", got, err, `{"A":"B"}`)
	}
	none := tool.BatchFunc(tool.Spec{Name: "none"}, func(ctx context.Context, args []json.RawMessage) []tool.Result { return nil })
	if _, err := none.Call(t.Context(), nil); err == nil || err.Error() != "tool none: batch function returned 0 results for 1 call" {
		t.Errorf("Call() error = %v, want tool none: batch function returned 0 results for 1 call", err)
	}
}

func TestBatchFuncNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "tool: BatchFunc called with a nil function" {
			t.Errorf("BatchFunc(spec, nil) panicked with %v, want tool: BatchFunc called with a nil function", r)
		}
	}()
	tool.BatchFunc(tool.Spec{Name: "x"}, nil)
}

func TestBatchCallersLeaveWhileWaitingForToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyed("lookup", false)
		p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"lookup": {Rate: 1, BatchMax: 1}}}, k)
		wantValues(t, []string{"k1"}, lookupAll(t.Context(), p, "lookup", "k1")) // takes the token
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if _, err := p.Call(ctx, "lookup", json.RawMessage(lookupArgs("k2"))); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Call(k2) error = %v, want context.DeadlineExceeded", err)
		}
		synctest.Wait() // the abandoned batch has given its token back
		wantValues(t, []string{"k3"}, lookupAll(t.Context(), p, "lookup", "k3"))
		batches, at := k.seen()
		if diff := cmp.Diff([][]string{{"k1"}, {"k3"}}, batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]time.Duration{0, time.Second}, at); diff != "" {
			t.Errorf("batch start times (-want +got):\n%s", diff)
		}
		want := []tool.Stats{{Name: "lookup", Requested: 3, Executed: 3, Batches: 3, Errors: 1}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

// FuzzPoolBatch sends three calls with arbitrary arguments at once to a
// Batcher that echoes its arguments, and checks that each caller gets its
// own canonical arguments back (or ErrBadArguments), that a batch never holds
// two identical calls, and that the counters add up.
func FuzzPoolBatch(f *testing.F) {
	f.Add(`{"key":"a"}`, `{"key":"b"}`, `{"key":"c"}`)
	f.Add(`{"key":"a"}`, `{ "key" : "a" }`, `{"key":"b"}`)
	f.Add(`{}`, ``, `[1]`)
	f.Add(`{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, `{"a":"\u00e9"}`)
	f.Fuzz(func(t *testing.T, a, b, c string) {
		synctest.Test(t, func(t *testing.T) {
			var (
				mu      sync.Mutex // protects batches
				batches [][]string
			)
			echoes := tool.BatchFunc(tool.Spec{Name: "echo"}, func(ctx context.Context, args []json.RawMessage) []tool.Result {
				res := make([]tool.Result, len(args))
				var seen []string
				for i, a := range args {
					res[i].Content = string(a)
					seen = append(seen, string(a))
				}
				mu.Lock()
				batches = append(batches, seen)
				mu.Unlock()
				return res
			})
			p := newPool(t, tool.PoolConfig{MaxResultBytes: -1, Policies: map[string]tool.Policy{"echo": {BatchMax: 2}}}, echoes)
			in := []string{a, b, c}
			var chans []<-chan callResult
			for _, args := range in {
				chans = append(chans, goCall(t.Context(), p, "echo", args))
			}
			bad := 0
			for i, ch := range chans {
				r := <-ch
				want, err := tool.CanonicalArgs(nil, []byte(in[i]))
				if err != nil {
					bad++
					if !errors.Is(r.err, tool.ErrBadArguments) {
						t.Errorf("Call(%q) error = %v, want ErrBadArguments", in[i], r.err)
					}
					continue
				}
				if r.res != string(want) || r.err != nil {
					t.Errorf("Call(%q) = %q, %v, want %q, nil", in[i], r.res, r.err, want)
				}
			}
			items := 0
			for _, b := range batches {
				items += len(b)
				if len(b) == 0 || len(b) > 2 {
					t.Errorf("batch %q: %d calls, want 1 or 2", b, len(b))
				}
				if len(slices.Compact(slices.Sorted(slices.Values(b)))) != len(b) {
					t.Errorf("batch %q holds identical calls", b)
				}
			}
			s := p.Stats()[0]
			if s.Requested != 3 || s.Errors != int64(bad) || s.Executed != int64(len(batches)) || s.Batches != s.Executed ||
				s.Coalesced+int64(items)+int64(bad) != 3 {
				t.Errorf("Stats() = %+v with %d bad calls and batches %q: counters do not add up", s, bad, batches)
			}
		})
	})
}
