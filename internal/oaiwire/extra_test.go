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

// TestSameAnswerExtra: a chunk matches an Extra only when the members
// ReadAnswerExtra returns for it are those of the Extra, by name and raw
// value; and the check does not allocate.
func TestSameAnswerExtra(t *testing.T) {
	first := []byte(`{"id":"c","object":"chat.completion.chunk","system_fingerprint":"fp1","choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[]},"finish_reason":null}]}`)
	x, err := oaiwire.ReadAnswerExtra(first)
	if err != nil || x == nil {
		t.Fatalf("ReadAnswerExtra: %v, %v", x, err)
	}
	for _, tc := range []struct {
		name string
		data string
		want bool
	}{
		{"same members, other text", `{"id":"c","object":"chat.completion.chunk","system_fingerprint":"fp1","choices":[{"index":0,"delta":{"content":"b"},"logprobs":{"content":[]},"finish_reason":null}]}`, true},
		{"null members left out", `{"id":"c","system_fingerprint":"fp1","service_tier":null,"choices":[{"index":0,"delta":{},"logprobs":{"content":[]}}]}`, true},
		{"other choice ignored", `{"system_fingerprint":"fp1","choices":[{"index":1,"x":1},{"index":0,"logprobs":{"content":[]}}]}`, true},
		{"value changed", `{"system_fingerprint":"fp2","choices":[{"index":0,"logprobs":{"content":[]}}]}`, false},
		{"choice value changed", `{"system_fingerprint":"fp1","choices":[{"index":0,"logprobs":{"content":[1]}}]}`, false},
		{"member missing", `{"system_fingerprint":"fp1","choices":[{"index":0,"delta":{}}]}`, false},
		{"member added", `{"system_fingerprint":"fp1","service_tier":"default","choices":[{"index":0,"logprobs":{"content":[]}}]}`, false},
		{"escaped name", `{"system_\u0066ingerprint":"fp1","choices":[{"index":0,"logprobs":{"content":[]}}]}`, false},
	} {
		if got := oaiwire.SameAnswerExtra([]byte(tc.data), x); got != tc.want {
			t.Errorf("%s: SameAnswerExtra = %v, want %v", tc.name, got, tc.want)
		}
	}
	if oaiwire.SameAnswerExtra(first, nil) {
		t.Error("SameAnswerExtra with no Extra = true")
	}
	if n := testing.AllocsPerRun(100, func() { oaiwire.SameAnswerExtra(first, x) }); n != 0 {
		t.Errorf("SameAnswerExtra allocates %v times", n)
	}
}

// TestChunkAppendJSON: Chunk.AppendJSON writes what json.Marshal writes,
// byte for byte, for the chunks it writes by hand and for the others.
func TestChunkAppendJSON(t *testing.T) {
	text := func(s string) *string { return &s }
	for _, c := range []oaiwire.Chunk{
		{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1700000000, Model: "sim", Choices: []oaiwire.ChunkChoice{{Delta: oaiwire.Delta{Role: "assistant", Content: text("")}}}},
		{ID: "a<b>&\u2028", Object: "chat.completion.chunk", Created: -1, Model: "m\"\\\n\x01\xff", Usage: oaiwire.Null, Choices: []oaiwire.ChunkChoice{{Delta: oaiwire.Delta{Content: text("héllo <w> \t\"q\" \u2029 \xc3")}}}},
		{ID: "x", Choices: []oaiwire.ChunkChoice{{Index: 2, Delta: oaiwire.Delta{}, FinishReason: text("stop")}, {Delta: oaiwire.Delta{Role: "assistant"}}}},
		{ID: "x", Choices: []oaiwire.ChunkChoice{}},
		{ID: "nil choices"},
		{ID: "usage", Choices: []oaiwire.ChunkChoice{}, Usage: &oaiwire.Usage{PromptTokens: 3}},
		{ID: "reasoning", Choices: []oaiwire.ChunkChoice{{Delta: oaiwire.Delta{ReasoningContent: "think", Event: json.RawMessage(`{"a":1}`)}}}},
		{ID: "tools", Choices: []oaiwire.ChunkChoice{{Delta: oaiwire.Delta{ToolCalls: []oaiwire.ToolCall{{ID: "c", Type: "function"}}}}}},
		{ID: "logprobs", Choices: []oaiwire.ChunkChoice{{Logprobs: &struct{}{}}}},
	} {
		want, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.AppendJSON([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("AppendJSON(%s)\n got %s\nwant prefix%s", c.ID, got, want)
		}
	}
}
