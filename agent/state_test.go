package agent_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// TestStateFinishAndResult checks that a failed result recorded on a state
// (Finish), saved as JSON and read back, rebuilds a result with the same
// error: text, kind, step, turn, classes and schema problems.
func TestStateFinishAndResult(t *testing.T) {
	verr := &schema.ValidationError{Problems: []schema.Problem{{Path: "$.a", Message: "missing"}}, Raw: `{}`}
	for name, cause := range map[string]error{
		"validation":   errors.Join(llm.ErrTruncated, verr),
		"rate limited": &llm.APIError{Backend: "b", StatusCode: 429, Err: llm.ErrRateLimited},
	} {
		t.Run(name, func(t *testing.T) {
			r := job.Result{Index: 2, Raw: `{}`, Tier: 1, Timings: job.Timings{Total: 5},
				Err: &job.AgentError{JobID: "j", Agent: 2, Turn: 1, Op: "validate", Kind: job.Classify(cause, false, false), Err: cause}}
			st := agent.State{JobID: "j", Index: 2, Status: agent.StatusRunning, Raw: `{}`}
			st.Finish(&r)
			if st.Status != agent.StatusFailed || st.Failure == nil || st.Tier != 1 || st.Timings.Total != 5 {
				t.Fatalf("Finish = status %s, failure %+v, tier %d, total %v; want failed with a failure, tier 1, total 5", st.Status, st.Failure, st.Tier, st.Timings.Total)
			}
			data, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			var back agent.State
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			got := back.Result("j")
			want, _ := r.MarshalJSON()
			line, _ := got.MarshalJSON()
			if string(line) != string(want) || got.Err.Error() != r.Err.Error() {
				t.Errorf("result from the saved state:\n%s\n%v\nwant\n%s\n%v", line, got.Err, want, r.Err)
			}
			for _, c := range []error{llm.ErrTruncated, llm.ErrRateLimited} {
				if errors.Is(got.Err, c) != errors.Is(r.Err, c) {
					t.Errorf("errors.Is(restored, %v) = %v, want %v", c, errors.Is(got.Err, c), errors.Is(r.Err, c))
				}
			}
		})
	}
	var st agent.State
	done := job.Result{Output: json.RawMessage(`1`)}
	st.Finish(&done)
	if st.Status != agent.StatusDone || st.Failure != nil {
		t.Errorf("Finish(done) = %s, %+v; want done, no failure", st.Status, st.Failure)
	}
}

// TestStateOldFailureFormat checks that a state saved before failures
// were kept as a job.Failure decodes into one, and that Input's numbers
// come back as json.Number even from json.Unmarshal.
func TestStateOldFailureFormat(t *testing.T) {
	var st agent.State
	err := json.Unmarshal([]byte(`{"index":1,"input":{"n":12345678901234567890},"status":"failed","err_kind":"validation","err_msg":"bad","err_op":"validate","err_turn":2,"err_class":"truncated,validation","problems":[{"path":"$","message":"x"}],"messages":null,"turns":3}`), &st)
	if err != nil {
		t.Fatal(err)
	}
	want := &job.Failure{Kind: job.KindValidation, Op: "validate", Turn: 2,
		Cause: []job.Link{{Message: "bad", Class: "truncated,validation"}}, Problems: []schema.Problem{{Path: "$", Message: "x"}}}
	if diff := cmp.Diff(want, st.Failure); diff != "" || st.Turns != 3 || st.Input["n"] != json.Number("12345678901234567890") {
		t.Errorf("decoded failure (-want +got):\n%s; turns %d, input %#v", diff, st.Turns, st.Input)
	}
	// A state with both keeps its Failure.
	st = agent.State{}
	if err := json.Unmarshal([]byte(`{"index":1,"status":"failed","failure":{"kind":"timeout","turn":0},"err_kind":"validation"}`), &st); err != nil || st.Failure.Kind != job.KindTimeout {
		t.Errorf("state with both = %+v, %v; want the failure member's", st.Failure, err)
	}
	// A state without a failure has none.
	st = agent.State{}
	if err := json.Unmarshal([]byte(`{"index":1,"status":"done","messages":[]}`), &st); err != nil || st.Failure != nil {
		t.Errorf("done state's failure = %+v, %v; want nil", st.Failure, err)
	}
}

// TestStateCloneFailure: a clone's failure is its own.
func TestStateCloneFailure(t *testing.T) {
	st := agent.State{Failure: &job.Failure{Cause: []job.Link{{Message: "a"}}, Problems: []schema.Problem{{Path: "$"}}}}
	c := st.Clone()
	c.Failure.Cause[0].Message, c.Failure.Problems[0].Path, c.Failure.Kind = "b", "$.x", "k"
	if st.Failure.Cause[0].Message != "a" || st.Failure.Problems[0].Path != "$" || st.Failure.Kind != "" {
		t.Errorf("changing a clone's failure changed the original: %+v", st.Failure)
	}
}
