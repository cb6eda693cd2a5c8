package oaiwire_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/internal/oaiwire"
)

// TestReadExtraExactNames: members whose names differ from the ones
// Request reads only by case are extra fields, not read into Request
// (encoding/json matches names regardless of case; "N" was read as n and
// refused as n=2 before).
func TestReadExtraExactNames(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"N":2,"Model":"x","Temperature":0.5,"logprobs":true}`)
	var r oaiwire.Request
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadExtra(body); err != nil {
		t.Fatal(err)
	}
	if r.N != nil || r.Temperature != nil || r.Model != "m" || len(r.Messages) != 1 || r.Messages[0].Content.Text != "hi" {
		t.Fatalf("request read: n %v, temperature %v, model %q, messages %+v", r.N, r.Temperature, r.Model, r.Messages)
	}
	want := map[string]string{"N": "2", "Model": `"x"`, "Temperature": "0.5", "logprobs": "true"}
	if len(r.Extra) != len(want) {
		t.Fatalf("extra fields %v, want %v", r.Extra, want)
	}
	for k, v := range want {
		if string(r.Extra[k]) != v {
			t.Errorf("extra %q = %s, want %s", k, r.Extra[k], v)
		}
	}

	// Only exact names: nothing is read again, nothing is extra.
	body = []byte(`{"model":"m","messages":[],"n":1}`)
	r = oaiwire.Request{}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadExtra(body); err != nil {
		t.Fatal(err)
	}
	if r.Extra != nil || r.N == nil || *r.N != 1 {
		t.Fatalf("extra %v, n %v", r.Extra, r.N)
	}
}
