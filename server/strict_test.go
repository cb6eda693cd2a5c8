package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// postRaw posts body to g's chat completions with the test key and returns
// the status and the error object of the answer (nil on success).
func postRaw(t *testing.T, g *gateway, body string) (int, *wireErr) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct{ Error *wireErr }
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil || out.Error == nil {
			t.Fatalf("status %d body %q: want an error object", resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out.Error
}

type wireErr struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// TestDuplicateKeysAndBadUTF8 (issue 27, defect 10): a body naming a key
// twice, or holding bytes that are not UTF-8, is 400 naming the key with
// its path or the byte's offset; it is never routed by the last key.
func TestDuplicateKeysAndBadUTF8(t *testing.T) {
	up := newSim(t, sim.Config{Seed: 2})
	spec, err := batchagent.NewSpec(batchagent.Def{Model: up, Task: "{input}", Priority: batchagent.Interactive})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}, "up": {Model: up, Name: "up"}},
		Agents:   map[string]*batchagent.Spec{"rev": spec},
		Keys:     []server.Key{{Name: "test", SHA256: server.HashKey(testKey)}},
	})
	tests := []struct {
		name, body string
		want       []string // in the message
	}{
		{"model twice", `{"model":"sim","model":"up","messages":[{"role":"user","content":"hi"}]}`, []string{`duplicate key "model"`, "$.model"}},
		{"nested key twice", `{"model":"sim","messages":[{"role":"user","role":"system","content":"hi"}]}`, []string{`duplicate key "role"`, "$.messages[0].role"}},
		{"bad UTF-8", "{\"model\":\"sim\",\"messages\":[{\"role\":\"user\",\"content\":\"h\xffi\"}]}", []string{"invalid UTF-8", "byte offset 54"}},
		{"lone surrogate", `{"model":"sim","messages":[{"role":"user","content":"\ud800"}]}`, []string{"invalid UTF-8", "$.messages[0].content"}},
		{"agent input with a key twice", `{"model":"agent:rev","messages":[{"role":"user","content":"{\"input\":\"a\",\"input\":\"b\"}"}]}`, []string{`duplicate key "input"`, "messages[0].content"}},
		{"agent mode n=2", `{"model":"agent:rev","n":2,"messages":[{"role":"user","content":"hi"}]}`, []string{"n=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e := postRaw(t, g, tt.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d (%+v), want 400", status, e)
			}
			if e.Type != "invalid_request_error" {
				t.Errorf("type %q, want invalid_request_error", e.Type)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q, want it to name %q", e.Message, w)
				}
			}
		})
	}
}

// TestBatchLineDuplicateKey (issue 27, defect 10): a batch line whose body
// names a key twice fails alone with a 400 naming it; the others run.
func TestBatchLineDuplicateKey(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{}, sim.Config{Seed: 1})
	c := g.client("")
	var in strings.Builder
	for i := range 4 {
		body := fmt.Sprintf(`{"model":"sim","messages":[{"role":"user","content":"hello %d"}]}`, i)
		switch i {
		case 1:
			body = `{"model":"sim","model":"nope","messages":[{"role":"user","content":"hi"}]}`
		case 2:
			body = "{\"model\":\"sim\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}"
		}
		fmt.Fprintf(&in, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i, body)
	}
	b := waitBatch(t, c, submitBatch(t, c, []byte(in.String())).ID)
	if b.Status != openai.BatchStatusCompleted {
		t.Fatalf("status %s errors %+v, want completed", b.Status, b.Errors)
	}
	out, errs := results(t, c, b, 4)
	if len(out) != 2 || len(errs) != 2 {
		t.Fatalf("%d ok and %d failed lines, want 2 and 2", len(out), len(errs))
	}
	for id, want := range map[string]string{"req-1": `duplicate key \"model\"`, "req-2": "invalid UTF-8"} {
		r := errs[id]
		if r.Response == nil || r.Response.StatusCode != http.StatusBadRequest || !strings.Contains(string(r.Response.Body), want) {
			t.Errorf("%s: %+v, want a 400 naming %s", id, r.Response, want)
		}
	}
}

// TestBatchEnvelopeDuplicateKey: a line naming custom_id (or any key of
// its envelope) twice fails the batch's validation with its line number,
// as any other malformed envelope does: which of the two ids would the
// answer carry?
func TestBatchEnvelopeDuplicateKey(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{}, sim.Config{Seed: 1})
	c := g.client("")
	input := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"sim","messages":[{"role":"user","content":"hi"}]}}
{"custom_id":"b","custom_id":"c","method":"POST","url":"/v1/chat/completions","body":{"model":"sim","messages":[{"role":"user","content":"hi"}]}}
`
	b := waitBatch(t, c, submitBatch(t, c, []byte(input)).ID)
	if b.Status != openai.BatchStatusFailed || len(b.Errors.Data) != 1 {
		t.Fatalf("status %s errors %+v, want failed with one error", b.Status, b.Errors.Data)
	}
	e := b.Errors.Data[0]
	if e.Line != 2 || !strings.Contains(e.Message, `duplicate key "custom_id"`) {
		t.Errorf("error %+v, want line 2 naming custom_id", e)
	}
}
