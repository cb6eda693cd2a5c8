package agent_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
	"github.com/google/go-cmp/cmp"
)

// hostile is a conversation with parallel tool calls in one message, a
// tool error, a correction (an answer sent back with a user message) and
// results of multi-byte text, ending in a turn of two parallel calls.
func hostile() []llm.Message {
	big := strings.Repeat("résumé ", 400) // 3,200 bytes of 2-byte runes
	call := func(id string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "t", Arguments: json.RawMessage(`{"q":"x"}`)}
	}
	res := func(id, content string, isErr bool) llm.Message {
		return llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "t", Content: content, IsError: isErr}
	}
	return []llm.Message{
		{Role: llm.RoleUser, Content: "the task " + big},
		{Role: llm.RoleAssistant, Content: "looking", ToolCalls: []llm.ToolCall{call("a1"), call("a2"), call("a3")}},
		res("a1", big, false), res("a2", "error: "+big, true), res("a3", "short", false),
		{Role: llm.RoleAssistant, Content: `{"bad":`},
		{Role: llm.RoleUser, Content: "Your answer was invalid JSON."},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("b1")}},
		res("b1", big, false),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c1"), call("c2")}},
		res("c1", big, false), res("c2", big, true),
	}
}

// latestTurn returns msgs from the last assistant message on.
func latestTurn(msgs []llm.Message) []llm.Message {
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			return msgs[i:]
		}
	}
	return nil
}

// TestCompact checks each stage of compaction on a hostile conversation:
// the task and the latest turn stay whole, every call keeps its one
// result, the result is no larger, and valid UTF-8.
func TestCompact(t *testing.T) {
	in := hostile()
	whole := agent.Size(in)
	tests := []struct {
		name          string
		target, limit int
		wantNote      string // the note's text, "" for none
		wantExcerpts  int    // tool results with a head/tail excerpt
		wantMarkers   int    // tool results shortened to the marker alone
	}{
		{"excerpts", whole - 100, whole - 100, "", 1, 0},
		{"all older excerpted", 0, whole, "", 3, 0}, // a3 is short already
		{"markers, oldest first", 0, whole - 2600, "", 1, 2},
		{"turns dropped", 0, 1, "[compacted: 3 earlier turns with 4 tool calls omitted to fit the context window]", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(in)
			out, changed := agent.Compact(in, tt.target, tt.limit)
			if diff := cmp.Diff(before, in); diff != "" {
				t.Fatalf("Compact modified its input: %s", diff)
			}
			if !changed {
				t.Fatal("Compact changed = false, want true")
			}
			if err := pairing(out); err != nil {
				t.Errorf("pairing: %v", err)
			}
			if got := agent.Size(out); got > whole {
				t.Errorf("size %d, grew from %d", got, whole)
			}
			if diff := cmp.Diff(in[0], out[0]); diff != "" {
				t.Errorf("task changed: %s", diff)
			}
			if diff := cmp.Diff(latestTurn(in), latestTurn(out)); diff != "" {
				t.Errorf("latest turn changed: %s", diff)
			}
			note := ""
			if out[1].Role == llm.RoleUser {
				note = out[1].Content
			}
			if note != tt.wantNote {
				t.Errorf("note %q, want %q", note, tt.wantNote)
			}
			excerpts, markers := 0, 0
			for _, m := range out {
				if !strings.Contains(m.Content, "[compacted: ") || m.Role != llm.RoleTool {
					continue
				}
				if strings.HasPrefix(m.Content, "\n[compacted: ") {
					markers++
				} else {
					excerpts++
				}
				if !json.Valid(mustJSON(t, m.Content)) || !strings.Contains(m.Content, " bytes omitted]") {
					t.Errorf("shortened result %q", m.Content)
				}
			}
			if excerpts != tt.wantExcerpts || markers != tt.wantMarkers {
				t.Errorf("%d excerpts, %d markers; want %d, %d", excerpts, markers, tt.wantExcerpts, tt.wantMarkers)
			}
			again, _ := agent.Compact(in, tt.target, tt.limit)
			if diff := cmp.Diff(out, again); diff != "" {
				t.Errorf("not deterministic: %s", diff)
			}
		})
	}
}

func mustJSON(t *testing.T, s string) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompactExcerpt checks the excerpt's shape: head, marker with the
// omitted byte count, tail.
func TestCompactExcerpt(t *testing.T) {
	content := strings.Repeat("a", 128) + strings.Repeat("m", 12345) + strings.Repeat("z", 64)
	in := []llm.Message{
		{Role: llm.RoleUser, Content: "task"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "1", Name: "t"}}},
		{Role: llm.RoleTool, ToolCallID: "1", Content: content},
		{Role: llm.RoleAssistant, Content: "done"},
	}
	out, _ := agent.Compact(in, 0, 1<<20)
	want := strings.Repeat("a", 128) + "\n[compacted: 12,345 bytes omitted]\n" + strings.Repeat("z", 64)
	if got := out[2].Content; got != want {
		t.Errorf("excerpt = %q, want %q", got, want)
	}
}

// TestCompactNoteMerges checks that a second compaction that drops more
// turns keeps one note, counting all the dropped turns.
func TestCompactNoteMerges(t *testing.T) {
	msgs := history(6)
	first, _ := agent.Compact(msgs, 0, agent.Size(msgs)/2)
	second, _ := agent.Compact(first, 0, agent.Size(first)/2)
	notes := 0
	for _, m := range second {
		if m.Role == llm.RoleUser && strings.HasPrefix(m.Content, "[compacted: ") {
			notes++
		}
	}
	var turns, calls int
	if _, err := fmt.Sscanf(second[1].Content, "[compacted: %d earlier turns with %d tool calls", &turns, &calls); err != nil || notes != 1 {
		t.Fatalf("second compaction: %d notes, first %q", notes, second[1].Content)
	}
	kept := 0
	for _, m := range second {
		if m.Role == llm.RoleAssistant {
			kept++
		}
	}
	if turns+kept != 6 || calls != turns {
		t.Errorf("note counts %d turns, %d calls; %d kept; want turns+kept = 6", turns, calls, kept)
	}
	if err := pairing(second); err != nil {
		t.Error(err)
	}
}

// FuzzCompact checks, over random conversations and budgets, that
// compaction keeps every call paired, the task and latest turn whole,
// never grows the conversation, and is deterministic.
func FuzzCompact(f *testing.F) {
	f.Add([]byte{3, 1, 200, 0, 2, 50, 60, 1, 1, 0}, 100, 200)
	f.Add([]byte{0, 0, 0}, 0, 0)
	f.Add([]byte{2, 3, 255, 255, 255, 0, 1, 9, 2, 2, 255, 7}, 10, 10)
	f.Fuzz(func(t *testing.T, shape []byte, target, limit int) {
		msgs := []llm.Message{{Role: llm.RoleUser, Content: "task"}}
		next := func() int {
			if len(shape) == 0 {
				return 0
			}
			b := shape[0]
			shape = shape[1:]
			return int(b)
		}
		for turn := 0; len(shape) > 0 && turn < 64; turn++ {
			n := next() % 4 // calls in this turn; 0: a text answer and a correction
			if n == 0 {
				msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: strings.Repeat("a", next())},
					llm.Message{Role: llm.RoleUser, Content: "again"})
				continue
			}
			a := llm.Message{Role: llm.RoleAssistant}
			var results []llm.Message
			for i := range n {
				id := fmt.Sprintf("t%d_%d", turn, i)
				a.ToolCalls = append(a.ToolCalls, llm.ToolCall{ID: id, Name: "t", Arguments: json.RawMessage(`{}`)})
				results = append(results, llm.Message{Role: llm.RoleTool, ToolCallID: id,
					Content: strings.Repeat("é", next()*8), IsError: next()%2 == 1})
			}
			msgs = append(append(msgs, a), results...)
		}
		out, _ := agent.Compact(msgs, target, limit)
		if err := pairing(out); err != nil {
			t.Fatalf("pairing: %v", err)
		}
		if got, was := agent.Size(out), agent.Size(msgs); got > was {
			t.Fatalf("size %d, grew from %d", got, was)
		}
		if !cmp.Equal(out[0], msgs[0]) || !cmp.Equal(latestTurn(out), latestTurn(msgs)) {
			t.Fatal("task or latest turn changed")
		}
		for _, m := range out {
			if !utf8Valid(m.Content) {
				t.Fatalf("invalid UTF-8 in %q", m.Content)
			}
		}
		again, _ := agent.Compact(msgs, target, limit)
		if !cmp.Equal(out, again) {
			t.Fatal("not deterministic")
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
