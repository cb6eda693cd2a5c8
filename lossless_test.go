package batchagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// sentinels are the error classes a result's cause may answer errors.Is
// for: a restored cause must answer for each as the fresh one did.
var sentinels = []error{
	llm.ErrRateLimited, llm.ErrOverloaded, llm.ErrServer, llm.ErrTimeout, llm.ErrConnection,
	llm.ErrContextLength, llm.ErrBadRequest, llm.ErrAuth, llm.ErrTruncated,
	context.Canceled, context.DeadlineExceeded, agent.ErrMaxTurns, agent.ErrStopped,
	tool.ErrFatal, schema.ErrNoJSON, batchagent.ErrCheckpoint, batchagent.ErrBackendUnavailable,
}

// sameError reports whether a restored error b answers as the fresh a
// does: text, *AgentError fields, errors.Is for every sentinel, errors.As
// for a *schema.ValidationError with the same problems and raw answer.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.Error() != b.Error() {
		return false
	}
	aa, aok := errors.AsType[*batchagent.AgentError](a)
	ba, bok := errors.AsType[*batchagent.AgentError](b)
	if aok != bok || aok && (aa.JobID != ba.JobID || aa.Agent != ba.Agent || aa.Turn != ba.Turn || aa.Op != ba.Op || aa.Kind != ba.Kind) {
		return false
	}
	for _, s := range sentinels {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	av, aok := errors.AsType[*schema.ValidationError](a)
	bv, bok := errors.AsType[*schema.ValidationError](b)
	return aok == bok && (!aok || gocmp.Equal(av.Problems, bv.Problems) && av.Raw == bv.Raw)
}

// describeErr spells out what sameError compares, for a failure message.
func describeErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	var is []string
	for _, s := range sentinels {
		if errors.Is(err, s) {
			is = append(is, s.Error())
		}
	}
	v, _ := errors.AsType[*schema.ValidationError](err)
	return fmt.Sprintf("%q is %q validation %+v", err, is, v)
}

// noCalls is the model of a resumed run whose every result must be
// restored: it counts the calls it gets and fails them.
type noCalls struct{ n atomic.Int64 }

func (m *noCalls) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	m.n.Add(1)
	return nil, errors.New("noCalls: called")
}

// always is a model whose every call fails with err.
func always(err error) llm.Model {
	return &scriptModel{plan: func(int, *llm.Request) step { return step{err: err} }}
}

// TestResultsLossless runs a job whose agent fails in one way per case (or
// succeeds) with a real checkpoint store, then runs it again on a second
// engine over the reopened store, so that every result is restored from
// its saved state (no model call), and checks that each restored result
// equals the fresh one (errors.Is and errors.As answering the same, timings
// included: the saved state keeps the fresh total) and that both encode to
// the same result line. An input that cannot be decoded is never saved:
// it fails the same way again, in a new wall time. A cancelled agent is
// never saved either (it resumes); job.TestFailureRoundTrip covers its classes.
func TestResultsLossless(t *testing.T) {
	fatal := tool.Func(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (string, error) {
			return "", fmt.Errorf("%w: disk gone", tool.ErrFatal)
		})
	tests := []struct {
		name     string
		def      func(t *testing.T, d *batchagent.Def)
		inputs   func() batchagent.Inputs
		wantKind batchagent.Kind
	}{
		{name: "success", def: func(t *testing.T, d *batchagent.Def) { d.Model = newSim(t, sim.Config{}) }},
		{name: "validation", wantKind: batchagent.KindValidation,
			def: func(t *testing.T, d *batchagent.Def) { d.Model = newSim(t, sim.Config{InvalidRate: 1}) }},
		{name: "rate limit", wantKind: batchagent.KindRateLimit,
			def: func(t *testing.T, d *batchagent.Def) { d.Model, d.NoOutageBudget = always(throttled), true }},
		{name: "rate limit after outage budget", wantKind: batchagent.KindRateLimit,
			def: func(t *testing.T, d *batchagent.Def) {
				d.OutageBudget, d.MaxRetries = 5*time.Millisecond, 100
				d.Model = &scriptModel{plan: func(n int, _ *llm.Request) step {
					if n == 1 {
						return step{toolCall: true} // answered: the backend is up
					}
					return step{err: throttled}
				}}
				d.Tools = []tool.Tool{echoNamed("read_file")}
			}},
		{name: "overloaded", wantKind: batchagent.KindBackend,
			def: func(t *testing.T, d *batchagent.Def) {
				d.Model, d.NoOutageBudget = newSim(t, sim.Config{FailRate: 1}), true
			}},
		{name: "context length", wantKind: batchagent.KindBackend,
			def: func(t *testing.T, d *batchagent.Def) {
				d.Model = always(&llm.APIError{Backend: "fake", StatusCode: 400, Message: "prompt too long", Err: llm.ErrContextLength})
			}},
		{name: "truncated", wantKind: batchagent.KindTruncated,
			def: func(t *testing.T, d *batchagent.Def) {
				d.Model = always(&llm.APIError{Backend: "fake", Message: "answer over the size cap", Err: llm.ErrTruncated})
			}},
		{name: "tool", wantKind: batchagent.KindTool,
			def: func(t *testing.T, d *batchagent.Def) {
				d.Model, d.Tools = newSim(t, sim.Config{ToolTurns: 1}), []tool.Tool{fatal}
			}},
		{name: "max turns", wantKind: batchagent.KindMaxTurns,
			def: func(t *testing.T, d *batchagent.Def) {
				d.Model, d.MaxTurns, d.Tools = newSim(t, sim.Config{ToolTurns: 5}), 2, []tool.Tool{echoTool()}
			}},
		{name: "timeout", wantKind: batchagent.KindTimeout,
			def: func(t *testing.T, d *batchagent.Def) {
				d.Model, d.Timeout = newSim(t, sim.Config{Latency: time.Minute}), 20*time.Millisecond
			}},
		{name: "template", wantKind: batchagent.KindTemplate,
			def: func(t *testing.T, d *batchagent.Def) { d.Model, d.Task = newSim(t, sim.Config{}), "look at {missing}" }},
		{name: "input", wantKind: batchagent.KindInput,
			def: func(t *testing.T, d *batchagent.Def) { d.Model = newSim(t, sim.Config{}) },
			inputs: func() batchagent.Inputs {
				return batchagent.JSONL(strings.NewReader("{oops\n"), "in.jsonl")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := func() batchagent.Inputs { return batchagent.Slice(inputs(1)) }
			if tt.inputs != nil {
				in = tt.inputs
			}
			path := filepath.Join(t.TempDir(), "run.db")
			run := func(model llm.Model) batchagent.Result {
				t.Helper()
				store, err := checkpoint.Open(path, checkpoint.Config{})
				if err != nil {
					t.Fatal(err)
				}
				d := batchagent.Def{ID: "lossless", Task: "item {id}", OutputSchema: json.RawMessage(outSchema),
					Backoff: batchagent.Backoff{Base: time.Millisecond, RateLimitBase: time.Millisecond, Max: time.Millisecond}}
				tt.def(t, &d)
				if model != nil {
					d.Model = model
				}
				_, res := runWith(t, batchagent.Config{Checkpoint: store}, d, in())
				if err := store.Close(); err != nil {
					t.Fatal(err)
				}
				if len(res) != 1 {
					t.Fatalf("%d results, want 1", len(res))
				}
				return res[0]
			}
			fresh := run(nil)
			if k := batchagent.KindOf(fresh.Err); k != tt.wantKind {
				t.Fatalf("fresh result: kind %q (%v), want %q", k, fresh.Err, tt.wantKind)
			}
			var resumed noCalls
			restored := run(&resumed)
			if tt.inputs != nil { // never saved, so run again: a new wall time and start
				fresh.Timings.Total, restored.Timings.Total = 0, 0
				fresh.Started, restored.Started = time.Time{}, time.Time{}
			}
			if n := resumed.n.Load(); n != 0 {
				t.Fatalf("resumed run made %d model calls, want every result restored", n)
			}
			if diff := gocmp.Diff(fresh, restored, gocmp.Comparer(sameError)); diff != "" {
				t.Errorf("restored result differs from the fresh one (-fresh +restored):\n%s\nfresh err: %s\nrestored err: %s",
					diff, describeErr(fresh.Err), describeErr(restored.Err))
			}
			fl, err := json.Marshal(fresh)
			if err != nil {
				t.Fatal(err)
			}
			rl, err := json.Marshal(restored)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fl, rl) {
				t.Errorf("result lines differ:\nfresh    %s\nrestored %s", fl, rl)
			}
			t.Logf("%s", fl)
		})
	}
}
