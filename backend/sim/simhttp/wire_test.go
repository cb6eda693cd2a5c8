package simhttp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// streamAnswer streams a (possibly truncated) answer the way the server
// does, one token at a time, and reassembles it from the chunks with
// llm.Accumulator. It fails the test on a chunk that is not JSON.
func streamAnswer(t *testing.T, a answer, total int) *llm.Response {
	t.Helper()
	c := newChunker("chatcmpl-1", "m", 1, true)
	var acc llm.Accumulator
	sent := 0
	for k := 1; k <= total; k++ {
		to := a.cursor(k)
		if to < sent || to > a.size {
			t.Fatalf("cursor(%d) = %d after %d, size %d", k, to, sent, a.size)
		}
		for ev := range strings.SplitSeq(strings.TrimSuffix(string(a.appendDeltas(nil, c, sent, to)), "\n\n"), "\n\n") {
			if ev == "" {
				continue
			}
			var ch struct {
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Index    int    `json:"index"`
							ID       string `json:"id"`
							Function struct {
								Name      string `json:"name"`
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch); err != nil || len(ch.Choices) != 1 {
				t.Fatalf("chunk %q: %v", ev, err)
			}
			d := ch.Choices[0].Delta
			if d.Content != "" {
				acc.Add(llm.Event{Type: llm.EventText, Text: d.Content})
			}
			for _, tc := range d.ToolCalls {
				acc.Add(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
			}
		}
		sent = to
	}
	if sent != a.size {
		t.Fatalf("after %d tokens the stream is at byte %d of %d", total, sent, a.size)
	}
	acc.Add(llm.Event{Type: llm.EventDone, FinishReason: a.finish})
	return acc.Response()
}

// FuzzAnswerStream checks that an answer streamed token by token, capped
// by max_tokens or not, reassembles to the answer the non-streamed path
// returns, in valid JSON chunks, without splitting characters.
func FuzzAnswerStream(f *testing.F) {
	f.Add("Done. alpha bravo", "", "", 0)
	f.Add("", "read_file", `{"path":"a.go"}`, 0)
	f.Add("", "read_file", `{"path":"a.go"}`, 3)
	f.Add("héllo wörld ✓ done", "", "", 2)
	f.Add("text", "t", `{"s":"日本語"}`, 5)
	f.Add("", "", "", 1)
	f.Add("\x00\"\\\n", "x\"y", "not json \xff", 1)
	f.Fuzz(func(t *testing.T, content, name, args string, maxTokens int) {
		if !utf8.ValidString(content) || !utf8.ValidString(args) || !utf8.ValidString(name) {
			t.Skip("the simulator generates UTF-8")
		}
		resp := &llm.Response{Message: llm.Message{Content: content}, FinishReason: llm.FinishStop}
		if name != "" {
			resp.Message.ToolCalls = []llm.ToolCall{{ID: "call_0", Name: name, Arguments: json.RawMessage(args)}, {ID: "call_1", Name: "second", Arguments: json.RawMessage(`{"n":1}`)}}
			resp.FinishReason = llm.FinishToolCalls
		}
		a := newAnswer(resp)
		total := sim.Tokens(a.size)
		if maxTokens = maxTokens%64 + 1; maxTokens > 0 && total > maxTokens {
			a.truncate(maxTokens * sim.BytesPerToken)
			total = maxTokens
			if a.size > total*sim.BytesPerToken || a.finish != llm.FinishLength {
				t.Fatalf("truncate(%d) left %d bytes, finish %q", total*sim.BytesPerToken, a.size, a.finish)
			}
		}
		if !utf8.ValidString(a.content) {
			t.Fatalf("truncated content %q splits a character", a.content)
		}
		got := streamAnswer(t, a, total)
		want := &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: a.content}, FinishReason: a.finish}
		for _, c := range a.calls {
			args := c.Arguments
			if len(args) == 0 {
				args = json.RawMessage("{}") // as Accumulator reports a call without arguments
			}
			want.Message.ToolCalls = append(want.Message.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("streamed answer mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestAnswerTruncate(t *testing.T) {
	t.Parallel()
	calls := []llm.ToolCall{
		{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}, // 9 + 15 bytes
		{ID: "b", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)},           // 6 + 8 bytes
	}
	tests := []struct {
		name    string
		content string
		calls   []llm.ToolCall
		n       int
		want    answer
	}{
		{"content cut", "Done. alpha", nil, 4, answer{content: "Done", size: 4}},
		{"content cut before a character", "ab✓cd", nil, 4, answer{content: "ab", size: 2}},
		{"second call dropped", "", calls, 26, answer{calls: calls[:1], size: 24}},
		{"args cut", "", calls, 12, answer{calls: []llm.ToolCall{{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"p`)}}, size: 12}},
		{"name only: dropped", "", calls, 8, answer{calls: []llm.ToolCall{}, size: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newAnswer(&llm.Response{Message: llm.Message{Content: tt.content, ToolCalls: tt.calls}})
			a.truncate(tt.n)
			tt.want.finish = llm.FinishLength
			if diff := cmp.Diff(tt.want, a, cmp.AllowUnexported(answer{})); diff != "" {
				t.Errorf("truncate(%d) mismatch (-want +got):\n%s", tt.n, diff)
			}
		})
	}
}

func TestChatDecode(t *testing.T) {
	t.Parallel()
	var cr oaiwire.Request
	raw := `{"model":"m","max_tokens":10,"max_completion_tokens":20,
		"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}},{"type":"function","function":{"name":"lookup"}}],
		"tool_choice":{"type":"function","function":{"name":"lookup"}},
		"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"integer"}}},
		"messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"U"},{"type":"image_url","image_url":{"url":"https://cdn.example.com/x.png"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"id\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"R"}]}`
	if err := json.Unmarshal([]byte(raw), &cr); err != nil {
		t.Fatal(err)
	}
	req, prompt, maxTokens, apiErr := decode(&cr)
	if apiErr != nil {
		t.Fatalf("decode() = %v", apiErr.message)
	}
	want := &llm.Request{
		Model: "m",
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "S"},
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "U"}, {Kind: llm.PartImage, URL: "https://cdn.example.com/x.png"}}},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"id":1}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: "R"},
		},
		Tools:     []llm.ToolDef{{Name: "lookup"}},
		Output:    &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"integer"}`)},
		MaxTokens: 20,
	}
	if diff := cmp.Diff(want, req); diff != "" {
		t.Errorf("decode() request mismatch (-want +got):\n%s", diff)
	}
	if maxTokens != 20 {
		t.Errorf("decode() max tokens = %d, want 20 (max_completion_tokens wins)", maxTokens)
	}
	wantPrompt := "<|im_start|>system\nS<|im_end|>\n" +
		`<|im_start|>tools` + "\n" + `[{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}},{"type":"function","function":{"name":"lookup"}}]<|im_end|>` + "\n" +
		"<|im_start|>user\nU<|im_end|>\n" +
		"<|im_start|>assistant\n\n<tool_call>lookup {\"id\":1}</tool_call><|im_end|>\n" +
		"<|im_start|>tool\nR<|im_end|>\n" +
		"<|im_start|>assistant\n"
	if string(prompt) != wantPrompt {
		t.Errorf("decode() prompt =\n%s\nwant\n%s", prompt, wantPrompt)
	}
}
