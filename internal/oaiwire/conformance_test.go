package oaiwire_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// checkSDK fails t where v, a value of the SDK's types decoded from JSON
// we wrote, saw a member it does not know (other than those in extra, by
// name) or a member of the wrong JSON type: its metadata (the JSON
// field of each struct) marks the first as an extra field, the second as
// present but not valid.
func checkSDK(t *testing.T, path string, v reflect.Value, extra map[string]bool) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkSDK(t, path, v.Elem(), extra)
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkSDK(t, path+"[]", v.Index(i), extra)
		}
	case reflect.Struct:
		meta := v.FieldByName("JSON")
		if !meta.IsValid() || meta.Kind() != reflect.Struct {
			return
		}
		for i := range meta.NumField() {
			name := meta.Type().Field(i).Name
			switch f := meta.Field(i); {
			case name == "ExtraFields":
				for _, k := range f.MapKeys() {
					if !extra[k.String()] {
						t.Errorf("%s.%s: a member the SDK does not know", path, k)
					}
				}
			case f.Type() == reflect.TypeFor[respjson.Field]():
				if fld := f.Interface().(respjson.Field); fld.Raw() != "" && fld.Raw() != "null" && !fld.Valid() {
					t.Errorf("%s.%s = %s: not the JSON type the SDK declares", path, name, fld.Raw())
				}
			}
		}
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() && sf.Name != "JSON" {
				checkSDK(t, path+"."+sf.Name, v.Field(i), extra)
			}
		}
	}
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

func ptr[T any](v T) *T { return &v }

// agentExtensions are the members the gateway's agent mode adds, which
// standard clients ignore.
var agentExtensions = map[string]bool{"reasoning_content": true, "batchagent_event": true, "batchagent_events": true, "cost": true}

// TestCompletionMatchesSDK: a completion as our servers write it decodes
// into the SDK's ChatCompletion with every member known and well typed
// (but the gateway's documented extensions), and the SDK reads back what
// was written.
func TestCompletionMatchesSDK(t *testing.T) {
	calls := []llm.ToolCall{{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}, {ID: "call_2", Name: "f"}}
	usage := oaiwire.NewUsage(llm.Usage{PromptTokens: 11, CompletionTokens: 7, CachedTokens: 5})
	priced := *usage
	priced.Cost = ptr(0.25)
	agent := oaiwire.NewReply("done", nil)
	agent.Refusal = oaiwire.Null
	agent.ReasoningContent, agent.Events = "turn 0\n", json.RawMessage(`[{"type":"turn","turn":0}]`)
	for _, c := range []struct {
		name  string
		reply oaiwire.Reply
		usage *oaiwire.Usage
	}{
		{"text", oaiwire.NewReply("hello <world> é", nil), usage},
		{"refusal", oaiwire.Reply{Role: "assistant", Refusal: json.RawMessage(`"I cannot."`)}, usage},
		{"empty", oaiwire.NewReply("", nil), usage},
		{"tool calls", oaiwire.NewReply("", calls), &priced},
		{"text and tool calls", oaiwire.NewReply("let me look", calls[:1]), nil},
		{"agent mode", agent, &priced},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, err := json.Marshal(oaiwire.Completion{ID: "chatcmpl-1", Object: "chat.completion", Created: 1700000000, Model: "m",
				Choices: []oaiwire.Choice{{Message: c.reply, FinishReason: "stop"}}, Usage: c.usage})
			if err != nil {
				t.Fatal(err)
			}
			var got oa.ChatCompletion
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("SDK decoding %s: %v", body, err)
			}
			checkSDK(t, "completion", reflect.ValueOf(got), agentExtensions)
			if got.ID != "chatcmpl-1" || got.Object != "chat.completion" || got.Created != 1700000000 || got.Model != "m" || len(got.Choices) != 1 {
				t.Fatalf("SDK read %s as %+v", body, got)
			}
			ch := got.Choices[0]
			if ch.Message.Role != "assistant" || ch.FinishReason != "stop" || ch.JSON.Logprobs.Raw() != "null" {
				t.Errorf("choice %s", ch.RawJSON())
			}
			want := ""
			if c.reply.Content != nil {
				want = *c.reply.Content
			}
			if ch.Message.Content != want || ch.Message.JSON.Content.Valid() != (c.reply.Content != nil) {
				t.Errorf("content %q (valid %v), want %q", ch.Message.Content, ch.Message.JSON.Content.Valid(), want)
			}
			if wantRefusal := string(c.reply.Refusal); ch.Message.JSON.Refusal.Raw() != wantRefusal {
				t.Errorf("refusal %s, want %s", ch.Message.JSON.Refusal.Raw(), wantRefusal)
			}
			if len(ch.Message.ToolCalls) != len(c.reply.ToolCalls) {
				t.Fatalf("%d tool calls, want %d", len(ch.Message.ToolCalls), len(c.reply.ToolCalls))
			}
			for i, tc := range ch.Message.ToolCalls {
				w := c.reply.ToolCalls[i]
				if tc.ID != w.ID || tc.Type != "function" || tc.Function.Name != w.Function.Name || tc.Function.Arguments != w.Function.Arguments {
					t.Errorf("tool call %d = %s, want %+v", i, tc.RawJSON(), w)
				}
			}
			if c.usage == nil {
				if got.JSON.Usage.Raw() != "null" {
					t.Errorf("usage %s, want null", got.JSON.Usage.Raw())
				}
				return
			}
			u := got.Usage
			if u.PromptTokens != 11 || u.CompletionTokens != 7 || u.TotalTokens != 18 || u.PromptTokensDetails.CachedTokens != 5 {
				t.Errorf("usage %s", u.RawJSON())
			}
		})
	}
}

// TestChunkMatchesSDK: the chunks of a stream as our servers write them
// decode into the SDK's ChatCompletionChunk with every member known and
// well typed, and ClientChunk reads from each what the SDK reads.
func TestChunkMatchesSDK(t *testing.T) {
	head := oaiwire.Chunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1700000000, Model: "m", Usage: oaiwire.Null}
	with := func(d oaiwire.Delta, finish *string) oaiwire.Chunk {
		c := head
		c.Choices = []oaiwire.ChunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	zero, one := 0, 1
	last := head
	last.Choices = []oaiwire.ChunkChoice{}
	usage := oaiwire.NewUsage(llm.Usage{PromptTokens: 11, CompletionTokens: 7, CachedTokens: 5})
	usage.Cost = ptr(0.5)
	last.Usage = usage
	noUsage := with(oaiwire.Delta{Content: ptr("x")}, nil)
	noUsage.Usage = nil
	chunks := []oaiwire.Chunk{
		with(oaiwire.Delta{Role: "assistant", Content: ptr("")}, nil),
		with(oaiwire.Delta{Content: ptr("hello <world> é")}, nil),
		with(oaiwire.Delta{ToolCalls: []oaiwire.ToolCall{{Index: &zero, ID: "call_1", Type: "function", Function: oaiwire.Function{Name: "read_file"}}}}, nil),
		with(oaiwire.Delta{ToolCalls: []oaiwire.ToolCall{{Index: &zero, Function: oaiwire.Function{Arguments: `{"path":`}}}}, nil),
		with(oaiwire.Delta{ToolCalls: []oaiwire.ToolCall{{Index: &one, ID: "call_2", Type: "function", Function: oaiwire.Function{Name: "f", Arguments: "{}"}}}}, nil),
		with(oaiwire.Delta{ReasoningContent: "turn 0\n", Event: json.RawMessage(`{"type":"turn","turn":0}`)}, nil),
		with(oaiwire.Delta{}, ptr("tool_calls")),
		last,
		noUsage,
	}
	for i, c := range chunks {
		body, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var got oa.ChatCompletionChunk
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("chunk %d: SDK decoding %s: %v", i, body, err)
		}
		checkSDK(t, "chunk", reflect.ValueOf(got), agentExtensions)
		if got.ID != c.ID || got.Object != "chat.completion.chunk" || got.Created != c.Created || got.Model != c.Model || len(got.Choices) != len(c.Choices) {
			t.Fatalf("chunk %d: SDK read %s as %+v", i, body, got)
		}
		var mine oaiwire.ClientChunk
		if err := json.Unmarshal(body, &mine); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if mine.IsError() || len(mine.Choices) != len(got.Choices) {
			t.Fatalf("chunk %d: ClientChunk read %s as %+v", i, body, mine)
		}
		for j, ch := range got.Choices {
			m := mine.Choices[j]
			if m.Index != ch.Index || m.FinishReason != ch.FinishReason || m.Delta.Content != ch.Delta.Content || m.Delta.Refusal != ch.Delta.Refusal || len(m.Delta.ToolCalls) != len(ch.Delta.ToolCalls) {
				t.Fatalf("chunk %d: ClientChunk %+v, SDK %s", i, m, ch.RawJSON())
			}
			for k, tc := range ch.Delta.ToolCalls {
				mc := m.Delta.ToolCalls[k]
				if mc.Index != tc.Index || mc.ID != tc.ID || mc.Type != tc.Type || mc.Function.Name != tc.Function.Name || mc.Function.Arguments != tc.Function.Arguments {
					t.Errorf("chunk %d: tool call %+v, SDK %s", i, mc, tc.RawJSON())
				}
			}
		}
		switch {
		case c.Usage == nil:
			if got.JSON.Usage.Raw() != "" || mine.Usage != nil {
				t.Errorf("chunk %d: usage %q, want absent", i, got.JSON.Usage.Raw())
			}
		case got.JSON.Usage.Valid():
			u := got.Usage
			mu := mine.Usage
			if u.PromptTokens != 11 || u.CompletionTokens != 7 || u.TotalTokens != 18 || u.PromptTokensDetails.CachedTokens != 5 ||
				mu == nil || mu.PromptTokens != 11 || mu.CompletionTokens != 7 || mu.PromptTokensDetails == nil || *mu.PromptTokensDetails.CachedTokens != 5 {
				t.Errorf("chunk %d: usage %s, ClientChunk's %+v", i, u.RawJSON(), mu)
			}
		default:
			if got.JSON.Usage.Raw() != "null" || mine.Usage != nil {
				t.Errorf("chunk %d: usage %q, want null", i, got.JSON.Usage.Raw())
			}
		}
	}
}

// errorBody is OpenAI's error body in the SDK's types.
type errorBody struct {
	Error shared.ErrorObject `json:"error"`
}

// TestErrorMatchesSDK: an error body as our servers write it is byte
// for byte json.Marshal's, decodes into the SDK's ErrorObject with every
// member known and well typed, and ParseError reads it back.
func TestErrorMatchesSDK(t *testing.T) {
	for _, e := range []oaiwire.ErrorBody{
		{Message: "no such endpoint", Type: "invalid_request_error", Code: "not_found"},
		{Message: "messages must be a non-empty array", Type: "invalid_request_error", Param: "messages", Code: "invalid_value"},
		{Message: "the model \"<a&b>\" does not exist \u2028 \xff é", Type: "server_error"},
	} {
		body := e.AppendJSON(nil)
		want, err := json.Marshal(marshalled(e))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("AppendJSON\n%s\njson.Marshal\n%s", body, want)
		}
		var got errorBody
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("SDK decoding %s: %v", body, err)
		}
		checkSDK(t, "error", reflect.ValueOf(got), nil)
		msg := strings.ToValidUTF8(e.Message, "\uFFFD")
		if got.Error.Message != msg || got.Error.Type != e.Type || got.Error.Param != e.Param || got.Error.Code != e.Code ||
			got.Error.JSON.Param.Valid() != (e.Param != "") || got.Error.JSON.Code.Valid() != (e.Code != "") {
			t.Errorf("SDK read %s as %+v", body, got.Error)
		}
		if m, typ, code := oaiwire.ParseError(body); m != msg || typ != e.Type || code != e.Code {
			t.Errorf("ParseError(%s) = %q, %q, %q", body, m, typ, code)
		}
	}
}

// marshalled is e in the shape json.Marshal writes as OpenAI's error.
func marshalled(e oaiwire.ErrorBody) any {
	var b struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	b.Error.Message, b.Error.Type = e.Message, e.Type
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// requests are the requests of the backend conformance suite, with every
// sampling parameter, and some edge cases.
func requests() []*llm.Request {
	temp, topP, seed := 0.25, 0.9, int64(-7)
	var reqs []*llm.Request
	for _, s := range []backendtest.Scenario{backendtest.Plain, backendtest.ToolCall, backendtest.ToolResult, backendtest.Structured} {
		reqs = append(reqs, backendtest.Request(s))
		full := backendtest.Request(s)
		full.Output, full.Temperature, full.TopP, full.Seed = backendtest.OutputSpec, &temp, &topP, &seed
		full.MaxTokens, full.Stop = 77, []string{"</s>", "\n\nUser:"}
		reqs = append(reqs, full)
	}
	return append(reqs,
		&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "<&> \u2028 \x00 \xff é"}}},
		&llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f"}}}}},
		&llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant}}},
		&llm.Request{Model: "m", Output: &llm.OutputSpec{Name: "a b/c" + string(make([]byte, 80)), Schema: json.RawMessage(` { "type" : "object" } `)}},
	)
}

// roundTrip fails t unless body, a request AppendRequest wrote, decodes
// into the SDK's ChatCompletionNewParams and encodes back as the same JSON
// value: every member is one the SDK knows, in its shape. ("stream" is
// not a parameter of the SDK's, which sets it for streaming calls.)
func roundTrip(t testing.TB, body []byte, stream bool) {
	t.Helper()
	var p oa.ChatCompletionNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("SDK decoding %s: %v", body, err)
	}
	back, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("SDK encoding %s: %v", body, err)
	}
	if stream {
		back = append(back[:len(back)-1], `,"stream":true}`...)
	}
	if !sameJSON(t, body, back) {
		t.Fatalf("AppendRequest\n%s\nthrough the SDK's types\n%s", body, back)
	}
}

// TestRequestMatchesSDK: a request AppendRequest writes goes through the
// SDK's ChatCompletionNewParams unchanged, with either token-cap name and
// streamed or not; and a request the SDK writes decodes into Request
// with each field the servers read.
func TestRequestMatchesSDK(t *testing.T) {
	for i, req := range requests() {
		for _, o := range []oaiwire.RequestOptions{{}, {Model: "served", MaxCompletionTokens: true, Stream: true}} {
			body, err := oaiwire.AppendRequest(nil, req, o)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			roundTrip(t, body, o.Stream)
		}
	}

	p := oa.ChatCompletionNewParams{
		Model: "m",
		Messages: []oa.ChatCompletionMessageParamUnion{
			oa.SystemMessage("sys"),
			oa.DeveloperMessage("dev"),
			oa.UserMessage([]oa.ChatCompletionContentPartUnionParam{oa.TextContentPart("a"), oa.TextContentPart("b")}),
			{OfAssistant: &oa.ChatCompletionAssistantMessageParam{ToolCalls: []oa.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{ID: "call_1", Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "f", Arguments: `{"x":1}`}},
			}}}},
			oa.ToolMessage("result", "call_1"),
		},
		Tools: []oa.ChatCompletionToolUnionParam{oa.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "f", Description: oa.String("does f"), Parameters: shared.FunctionParameters{"type": "object"},
		})},
		ToolChoice:          oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String("none")},
		MaxTokens:           oa.Int(5),
		MaxCompletionTokens: oa.Int(6),
		Temperature:         oa.Float(0.5),
		TopP:                oa.Float(0.75),
		Seed:                oa.Int(-3),
		N:                   oa.Int(1),
		Stop:                oa.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"a", "b"}},
		StreamOptions:       oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
		ResponseFormat: oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "out", Schema: map[string]any{"type": "object"}},
		}},
	}
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var r oaiwire.Request
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	msgs, fault := r.LLMMessages((*oaiwire.Message).Text)
	if fault != nil {
		t.Fatalf("LLMMessages: %+v", fault)
	}
	wantMsgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "sys"},
		{Role: llm.RoleSystem, Content: "dev"},
		{Role: llm.RoleUser, Content: "ab"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}},
		{Role: llm.RoleTool, Content: "result", ToolCallID: "call_1"},
	}
	if !reflect.DeepEqual(msgs, wantMsgs) {
		t.Errorf("messages of %s:\n%+v\nwant\n%+v", body, msgs, wantMsgs)
	}
	tools, bad := r.LLMTools()
	if bad != -1 || len(tools) != 1 || tools[0].Name != "f" || tools[0].Description != "does f" || !sameJSON(t, tools[0].Parameters, []byte(`{"type":"object"}`)) {
		t.Errorf("tools of %s: %+v (bad %d)", body, tools, bad)
	}
	if r.Model != "m" || string(r.ToolChoice) != `"none"` || *r.MaxTokens != 5 || *r.MaxCompletionTokens != 6 || *r.Temperature != 0.5 ||
		*r.TopP != 0.75 || *r.Seed != -3 || *r.N != 1 || !sameJSON(t, r.Stop, []byte(`["a","b"]`)) || !r.IncludeUsage() ||
		r.ResponseFormat == nil || r.ResponseFormat.Type != "json_schema" || r.ResponseFormat.JSONSchema == nil ||
		r.ResponseFormat.JSONSchema.Name != "out" || !sameJSON(t, r.ResponseFormat.JSONSchema.Schema, []byte(`{"type":"object"}`)) {
		t.Errorf("decoded %s as %+v", body, r)
	}
}
