package checkpointtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/schema"
)

// oldStates are failed states as version 0 of the state format wrote them,
// before failures were kept as a job.Failure: in six members (err_kind,
// err_msg, err_op, err_turn, err_class, problems). Each comes with the
// result line the version that wrote it exported for it, and the classes
// its error answered errors.Is for. The second's classes are listed in
// another order than the engine wrote them: a reader must not depend on
// it.
var oldStates = []struct {
	line, result string
	is           []string
}{{
	line:   `{"job_id":"old","index":0,"input":{"id":7},"status":"failed","err_kind":"validation","err_msg":"check: output does not match schema: $: missing required property \"answer\"; $.n: got string, want integer","err_op":"validate","err_turn":2,"err_class":"validation","problems":[{"path":"$.n","message":"got string, want integer"},{"path":"$","message":"missing required property \"answer\""}],"messages":null,"turns":3,"model_calls":3,"retries":0,"corrections":0,"tool_calls":0,"usage":{"prompt_tokens":120,"completion_tokens":30},"timings":{"queue":0,"inference":2000000000,"tools":0,"backoff":0,"ttft":0,"total":3000000000},"raw":"{\"n\":\"12\"}"}`,
	result: `{"index":0,"input":{"id":7},"error":{"kind":"validation","op":"validate","turn":2,"message":"check: output does not match schema: $: missing required property \"answer\"; $.n: got string, want integer","class":"validation","problems":[{"path":"$.n","message":"got string, want integer"},{"path":"$","message":"missing required property \"answer\""}]},"raw":"{\"n\":\"12\"}","model_calls":3,"turns":3,"tool_calls":0,"usage":{"prompt_tokens":120,"completion_tokens":30},"timings":{"queue_s":0,"inference_s":2,"tools_s":0,"ttft_s":0,"total_s":3}}`,
}, {
	line:   `{"job_id":"old","index":1,"input":{"id":8},"status":"failed","err_kind":"rate_limit","err_msg":"backend unavailable: no answer for 1m0s: openai: HTTP 429: llm: rate limited","err_op":"generate","err_class":"backend_unavailable,rate_limited","messages":null,"turns":0,"model_calls":4,"retries":0,"corrections":0,"tool_calls":0,"usage":{"prompt_tokens":0,"completion_tokens":0},"timings":{"queue":0,"inference":0,"tools":0,"backoff":1000000000,"ttft":0,"total":61000000000}}`,
	result: `{"index":1,"input":{"id":8},"error":{"kind":"rate_limit","op":"generate","turn":0,"message":"backend unavailable: no answer for 1m0s: openai: HTTP 429: llm: rate limited","class":"rate_limited,backend_unavailable"},"model_calls":4,"turns":0,"tool_calls":0,"usage":{"prompt_tokens":0,"completion_tokens":0},"timings":{"queue_s":0,"inference_s":0,"tools_s":0,"backoff_s":1,"ttft_s":0,"total_s":61}}`,
	is:     []string{"llm: rate limited", "backend unavailable"},
}}

// testOldFormat: a failed state saved in the format of version 0 (its
// failure in six string members), decoded as every Checkpointer decodes a
// state (encoding/json, numbers as json.Number), saved and loaded, still
// rebuilds the result that version exported: the same result line, byte
// for byte, and an error of the same text, kind, step, turn and schema
// problems, answering errors.Is for the same classes.
func testOldFormat(t testing.TB, c batchagent.Checkpointer) {
	for _, old := range oldStates {
		dec := json.NewDecoder(bytes.NewReader([]byte(old.line)))
		dec.UseNumber()
		var st agent.State
		if err := dec.Decode(&st); err != nil {
			t.Fatalf("decode %s: %v", old.line, err)
		}
		save(t, c, st)
	}
	got := load(t, c, "old")
	wantVerr := &schema.ValidationError{Problems: []schema.Problem{
		{Path: "$.n", Message: "got string, want integer"},
		{Path: "$", Message: `missing required property "answer"`},
	}, Raw: `{"n":"12"}`}
	for i, old := range oldStates {
		st, ok := got[i]
		if !ok {
			t.Errorf("old state %d: not loaded", i)
			continue
		}
		r := st.Result("old")
		line, err := r.MarshalJSON()
		if err != nil || string(line) != old.result {
			t.Errorf("old state %d: result line\n%s (%v)\nwant\n%s", i, line, err, old.result)
		}
		v := viewOf(r)
		want := resultView{Kind: batchagent.KindValidation, Op: "validate", Turn: 2, Problems: wantVerr.Problems, Is: old.is,
			Err: `job old agent 0 turn 2: validate: check: output does not match schema: $: missing required property "answer"; $.n: got string, want integer`}
		if i == 1 {
			want = resultView{Kind: batchagent.KindRateLimit, Op: "generate", Turn: 0, Is: old.is,
				Err: "job old agent 1 turn 0: generate: backend unavailable: no answer for 1m0s: openai: HTTP 429: llm: rate limited"}
		}
		v.Result = batchagent.Result{}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Errorf("old state %d: result's error differs (-want +got):\n%s", i, diff)
		}
		if ve, ok := errors.AsType[*schema.ValidationError](r.Err); i == 0 && (!ok || !cmp.Equal(ve, wantVerr)) {
			t.Errorf("old state 0: errors.As(*schema.ValidationError) = %+v, %v; want %+v", ve, ok, wantVerr)
		}
		if i == 1 && slices.Contains(v.Is, "context canceled") {
			t.Errorf("old state 1: answers errors.Is(context.Canceled), a class it did not have")
		}
	}
}
