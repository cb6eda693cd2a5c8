package simhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// FuzzServeChat sends any body to a server whose scheduler has stopped: a
// request it cannot serve must get a 400, one it could serve a 503, always
// with an OpenAI error body, and never a panic.
func FuzzServeChat(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"Say hello."}]}`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"stream_options":{"include_usage":true}}`)
	f.Add(`{"messages":[{"role":"user","content":"path: a.go"}],"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}],"tool_choice":"required"}`)
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"array","minItems":3}}},"max_tokens":1}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"max_completion_tokens":-1}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"none"}}}`)
	f.Add(`{"messages":[{"role":"user","content":7}]}`)
	f.Add(`{"messages":[]}`)
	f.Add(`[]`)
	f.Add(``)
	s, err := simhttp.New(simhttp.Config{ContextWindow: 4096})
	if err != nil {
		f.Fatal(err)
	}
	stopped, cancel := context.WithCancel(f.Context())
	cancel()
	if err := s.Run(stopped); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest && rec.Code != http.StatusServiceUnavailable {
			t.Errorf("POST %q = %d, want 400 or 503", body, rec.Code)
		}
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("POST %q: error body %q is not an OpenAI error (%v)", body, rec.Body, err)
		}
	})
}
