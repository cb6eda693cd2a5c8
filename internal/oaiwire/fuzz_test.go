package oaiwire_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// FuzzErrorBody: an error body is json.Marshal's, byte for byte, for any
// text, and ParseError reads back its message, type and code.
func FuzzErrorBody(f *testing.F) {
	f.Add("no such endpoint", "invalid_request_error", "", "not_found")
	f.Add("<&> \u2028 \x00 \xff é \"q\"", "", "messages[0].content", "")
	f.Fuzz(func(t *testing.T, msg, typ, param, code string) {
		e := oaiwire.ErrorBody{Message: msg, Type: typ, Param: param, Code: code}
		body := e.AppendJSON([]byte("x"))[1:]
		want, err := json.Marshal(marshalled(e))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("AppendJSON\n%s\njson.Marshal\n%s", body, want)
		}
		valid := func(s string) string { return string([]rune(s)) } // as JSON writes it: U+FFFD for each bad byte
		if m, ty, c := oaiwire.ParseError(body); m != valid(msg) || ty != valid(typ) || c != valid(code) {
			t.Fatalf("ParseError(%s) = %q, %q, %q", body, m, ty, c)
		}
	})
}

// FuzzParseError feeds arbitrary bodies to ParseError: it never panics,
// and what it returns of a body that is valid UTF-8 is valid UTF-8.
func FuzzParseError(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"m","type":"t","param":null,"code":"c"}}`,
		`{"error":{"message":"Rate limit reached","type":"requests","code":429}}`,
		`{"error":"text"}`,
		`{"object":"error","message":"maximum context length is 4096 tokens","type":"BadRequestError","code":400}`,
		`{"detail":"Not Found"}`,
		`{"detail":[{"loc":["body"],"msg":"field required"}]}`,
		"<html>\n502 Bad Gateway\n</html>",
		``, `null`, `[1,2]`, `{"error":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, typ, code := oaiwire.ParseError(body)
		if utf8.Valid(body) && (!utf8.ValidString(msg) || !utf8.ValidString(typ) || !utf8.ValidString(code)) {
			t.Fatalf("ParseError(%q) = %q, %q, %q: not UTF-8", body, msg, typ, code)
		}
	})
}

// FuzzRequestMatchesSDK: a request AppendRequest writes from arbitrary
// text goes through the SDK's ChatCompletionNewParams unchanged, or is
// refused.
func FuzzRequestMatchesSDK(f *testing.F) {
	f.Add("sys", "hello", "", "lookup", "Looks up.", `{"type":"object"}`, `{"id":7}`, "call_1", "tool says", "out", `{"type":"object"}`, 10, 0.5, true)
	f.Add("", "<&>\u2028\xff", "answer", "", "", "", "", "", "", "", "", 0, -1.0, false)
	f.Add("a\"b\\c", "\x00", "{\"x\":1}", "n", "d", ` [ 1 , 2 ] `, ``, "id", "", "a b", `{"a":`, -5, 1e300, true)
	f.Fuzz(func(t *testing.T, system, user, assistant, toolName, toolDesc, params, args, callID, toolOut, outName, outSchema string, maxTokens int, temp float64, flag bool) {
		req := &llm.Request{MaxTokens: maxTokens}
		if system != "" {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleSystem, Content: system})
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: user})
		a := llm.Message{Role: llm.RoleAssistant, Content: assistant}
		if flag {
			a.ToolCalls = []llm.ToolCall{{ID: callID, Name: toolName, Arguments: json.RawMessage(args)}}
		}
		req.Messages = append(req.Messages, a)
		if flag && callID != "" {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Content: toolOut, ToolCallID: callID})
		}
		if toolName != "" {
			req.Tools = []llm.ToolDef{{Name: toolName, Description: toolDesc, Parameters: json.RawMessage(params)}}
		}
		if outSchema != "" {
			req.Output = &llm.OutputSpec{Name: outName, Schema: json.RawMessage(outSchema)}
		}
		if temp == temp && temp < 1e308 && temp > -1e308 { // NaN and infinities: refused
			req.Temperature = &temp
		}
		o := oaiwire.RequestOptions{Model: "m", MaxCompletionTokens: flag, Stream: !flag}
		body, err := oaiwire.AppendRequest(nil, req, o)
		if err != nil {
			if json.Valid([]byte(params)) && json.Valid([]byte(outSchema)) {
				t.Fatalf("refused a request with valid schemas: %v", err)
			}
			return
		}
		// The SDK declares schemas as objects; AppendRequest sends any
		// JSON it is given, as the caller gave it.
		object := func(s string) bool { return s == "" || bytes.HasPrefix(bytes.TrimSpace([]byte(s)), []byte("{")) }
		if toolName != "" && !object(params) || !object(outSchema) {
			return
		}
		roundTrip(t, body, o.Stream)
	})
}

// FuzzContent: a message's content decodes as encoding/json decodes it
// into an interface: a string as the same text, null as nothing, any
// other value as its JSON; and it encodes back as the same JSON value.
func FuzzContent(f *testing.F) {
	for _, s := range []string{`"hello"`, `"a\"b\u00e9\ud83d\ude00"`, "\"\xff\xfe\"", `null`, `[{"type":"text","text":"a"}]`, `{"a":1}`, `12`, `true`, ` "spaced" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		body := append(append([]byte(`{"role":"user","content":`), value...), '}')
		var want struct{ Content any }
		if json.Unmarshal(body, &want) != nil {
			return
		}
		var m oaiwire.Message
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("decoding %s: %v", body, err)
		}
		c := m.Content
		wantBack := value
		switch w := want.Content.(type) {
		case string:
			if !c.IsText || c.Text != w || c.Raw != nil {
				t.Fatalf("%s decoded as %+v, want the text %q", value, c, w)
			}
			wantBack, _ = json.Marshal(w)
		case nil:
			if c.IsText || c.Raw != nil {
				t.Fatalf("%s decoded as %+v, want nothing", value, c)
			}
		default:
			if c.IsText || !sameJSON(t, c.Raw, value) {
				t.Fatalf("%s decoded as %+v", value, c)
			}
		}
		back, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, back, wantBack) {
			t.Fatalf("%s encoded back as %s, want %s", value, back, wantBack)
		}
	})
}
