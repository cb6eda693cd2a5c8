package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

// sdkBody is the body the SDK sent for req before body: its parameters
// marshalled, with "stream":true set for a streaming call.
func sdkBody(t testing.TB, m *Model, req *llm.Request, stream bool) ([]byte, error) {
	t.Helper()
	p, err := m.params(req, stream)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if stream {
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("SDK body %s: %v", b, err)
		}
		v["stream"] = true
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	return b, nil
}

// sameJSON reports whether a and b hold the same JSON value (numbers
// compared as their text).
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	decode := func(x []byte) any {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("not JSON: %v: %s", err, x)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// checkBody fails t unless body and the SDK encode req the same way, or
// refuse it with the same error.
func checkBody(t testing.TB, m *Model, req *llm.Request) {
	t.Helper()
	for _, stream := range []bool{false, true} {
		got, err := m.body(req, stream)
		want, werr := sdkBody(t, m, req, stream)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("stream %v: body error %v, SDK %v", stream, err, werr)
		}
		if err == nil && !sameJSON(t, got, want) {
			t.Fatalf("stream %v: body\n%s\nSDK\n%s", stream, got, want)
		}
	}
}

func testModel(t testing.TB, flavor Flavor, model string) *Model {
	t.Helper()
	m, err := New(Config{Flavor: flavor, Model: model, BaseURL: "http://127.0.0.1:1/v1", APIKey: backendtest.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBodyMatchesSDK: the body written without the SDK is, as a JSON
// value, the one the SDK wrote, for every scenario of the conformance
// suite, both token-cap names, every sampling parameter and the
// requests both refuse.
func TestBodyMatchesSDK(t *testing.T) {
	temp, topP, seed := 0.25, 0.9, int64(-7)
	var reqs []*llm.Request
	for _, s := range []backendtest.Scenario{backendtest.Plain, backendtest.ToolCall, backendtest.ToolResult, backendtest.Structured} {
		r := backendtest.Request(s)
		reqs = append(reqs, r)
		full := backendtest.Request(s)
		full.Output, full.Temperature, full.TopP, full.Seed = backendtest.OutputSpec, &temp, &topP, &seed
		full.MaxTokens, full.Stop = 77, []string{"</s>", "\n\nUser:"}
		reqs = append(reqs, full)
	}
	reqs = append(reqs,
		&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "<&> \u2028 \x00 \xff é"}}},
		&llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f"}}}}},
		&llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant}}},
		&llm.Request{Model: "m", Output: &llm.OutputSpec{Name: "a b/c" + string(make([]byte, 80)), Schema: json.RawMessage(` { "type" : "object" } `)}},
		// Refused by both.
		nil,
		&llm.Request{Model: "m", Messages: []llm.Message{{Role: "robot", Content: "x"}}},
		&llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}},
		&llm.Request{Model: "m", Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{"a":`)}}},
		&llm.Request{Model: "m", Output: &llm.OutputSpec{Schema: json.RawMessage(`nope`)}},
		&llm.Request{Model: "m", Output: &llm.OutputSpec{}},
	)
	for _, flavor := range []Flavor{FlavorVLLM, FlavorOpenAI} {
		for _, model := range []string{"", "served"} {
			m := testModel(t, flavor, model)
			for i, r := range reqs {
				t.Run("", func(t *testing.T) {
					defer func() {
						if t.Failed() {
							t.Logf("flavor %s, config model %q, request %d", flavor, model, i)
						}
					}()
					checkBody(t, m, r)
				})
			}
		}
	}
}

// FuzzBodyMatchesSDK holds body equal to the SDK's encoding on requests
// built from arbitrary text: contents, names, arguments, schemas.
func FuzzBodyMatchesSDK(f *testing.F) {
	f.Add("sys", "hello", "", "lookup", "Looks up.", `{"type":"object"}`, `{"id":7}`, "call_1", "tool says", "out", `{"type":"object"}`, 10, 0.5, true)
	f.Add("", "<&>\u2028\xff", "answer", "", "", "", "", "", "", "", "", 0, -1.0, false)
	f.Add("a\"b\\c", "\x00", "{\"x\":1}", "n", "d", ` [ 1 , 2 ] `, ``, "id", "", "a b", `{"a":`, -5, 1e300, true)
	models := map[bool]*Model{false: testModel(f, FlavorVLLM, ""), true: testModel(f, FlavorOpenAI, "")}
	f.Fuzz(func(t *testing.T, system, user, assistant, toolName, toolDesc, params, args, callID, toolOut, outName, outSchema string, maxTokens int, temp float64, flag bool) {
		req := &llm.Request{Model: "m", MaxTokens: maxTokens}
		if system != "" {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleSystem, Content: system})
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: user})
		a := llm.Message{Role: llm.RoleAssistant, Content: assistant}
		if flag {
			a.ToolCalls = []llm.ToolCall{{ID: callID, Name: toolName, Arguments: json.RawMessage(args)}}
		}
		req.Messages = append(req.Messages, a)
		if flag {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Content: toolOut, ToolCallID: callID})
		}
		if toolName != "" {
			req.Tools = []llm.ToolDef{{Name: toolName, Description: toolDesc, Parameters: json.RawMessage(params)}}
		}
		if outSchema != "" {
			req.Output = &llm.OutputSpec{Name: outName, Schema: json.RawMessage(outSchema)}
		}
		if temp == temp && temp < 1e308 && temp > -1e308 { // NaN and infinities: neither encoder can send them
			req.Temperature = &temp
		}
		checkBody(t, models[flag], req)
	})
}

// BenchmarkRequestBody encodes the request of a 20-turn tool-using
// conversation (about 9 KB of JSON) with body and with the SDK.
func BenchmarkRequestBody(b *testing.B) {
	m := testModel(b, FlavorVLLM, "m")
	req := backendtest.Request(backendtest.ToolResult)
	req.Output = backendtest.OutputSpec
	for i := range 20 {
		id := "call_" + string(rune('a'+i))
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"src/module/file.go"}`)}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: string(bytes.Repeat([]byte("package module // a line of the file\n"), 10))},
		)
	}
	b.Run("body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.body(req, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := m.params(req, true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
