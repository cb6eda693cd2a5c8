package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

func TestAnswerLimit(t *testing.T) {
	tests := []struct {
		maxTokens int
		want      int
	}{
		{0, llm.MaxAnswerBytes},
		{-1, llm.MaxAnswerBytes},
		{48, llm.MinAnswerBytes},
		{4096, 4096 * llm.BytesPerToken},
		{llm.MaxAnswerBytes, llm.MaxAnswerBytes},
		{1 << 62, llm.MaxAnswerBytes},
	}
	for _, tt := range tests {
		if got := llm.AnswerLimit(tt.maxTokens); got != tt.want {
			t.Errorf("AnswerLimit(%d) = %d, want %d", tt.maxTokens, got, tt.want)
		}
	}
	if got, want := llm.BodyLimit(4096), int64(2*4096*llm.BytesPerToken+1<<20); got != want {
		t.Errorf("BodyLimit(4096) = %d, want %d", got, want)
	}
}

// TestAccumulatorLimit stops holding text and tool calls at the cap: the event that would cross it is refused with a *SizeError
// wrapping ErrTruncated, and what was held stays.
func TestAccumulatorLimit(t *testing.T) {
	acc := llm.Accumulator{Limit: 80, MaxTokens: 3} // 5 of text, then 71 for the call
	for _, ev := range []llm.Event{
		{Type: llm.EventText, Text: "12345"},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, ID: "c", Name: "f", Arguments: `{"a":`}},
		{Type: llm.EventUsage, Usage: llm.Usage{CompletionTokens: 3}},
	} {
		if err := acc.Add(ev); err != nil {
			t.Fatalf("Add(%+v) = %v, want nil", ev, err)
		}
	}
	err := acc.Add(llm.Event{Type: llm.EventText, Text: "xxxxx"})
	se, ok := errors.AsType[*llm.SizeError](err)
	if !ok || !errors.Is(err, llm.ErrTruncated) || se.Limit != 80 || se.MaxTokens != 3 {
		t.Fatalf("Add past the limit = %v, want a *SizeError{Limit: 80, MaxTokens: 3} wrapping ErrTruncated", err)
	}
	if !strings.Contains(err.Error(), "80-byte size cap (max_tokens 3)") {
		t.Errorf("error %q does not name the cap and max_tokens", err)
	}
	if got := acc.Response().Message.Content; got != "12345" {
		t.Errorf("content after the refused event = %q, want %q", got, "12345")
	}
	calls := llm.Accumulator{Limit: 1000}
	var err2 error
	for i := 0; i < 100 && err2 == nil; i++ {
		err2 = calls.Add(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: i, ID: "c", Name: "f"}})
	}
	if !errors.Is(err2, llm.ErrTruncated) || len(calls.Response().Message.ToolCalls) > 1000/64 {
		t.Errorf("endless empty tool calls: err %v after %d calls, want ErrTruncated within %d", err2, len(calls.Response().Message.ToolCalls), 1000/64)
	}
	var unlimited llm.Accumulator
	if err := unlimited.Add(llm.Event{Type: llm.EventText, Text: strings.Repeat("x", 1<<20)}); err != nil {
		t.Errorf("Add without a Limit = %v, want nil", err)
	}
}
