package server

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/internal/oaiwire"
)

// FuzzChatRequest feeds arbitrary bodies to the request decoding: it must
// never panic, and a request it accepts has messages and no negative cap.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"stop":["a","b"],"max_completion_tokens":5,"n":1}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"stop":"a","max_tokens":-1}`,
		`{"messages":[{"role":"user","content":{"a":1}}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lGODlhAQABAAAAACw=","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"file","file":{"file_id":"file-1"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!"}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var cr oaiwire.Request
		if json.Unmarshal(body, &cr) != nil {
			return
		}
		_ = lastUser(&cr)
		_, _, _ = agentInput(&cr)
		req, e := llmRequest(&cr)
		if e != nil {
			if e.status != 400 || e.message == "" {
				t.Fatalf("refusal %+v, want a 400 with a message", e)
			}
			return
		}
		if len(req.Messages) == 0 || req.MaxTokens < 0 {
			t.Fatalf("accepted %s as %+v", body, req)
		}
	})
}
