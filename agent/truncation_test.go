package agent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
	"github.com/google/go-cmp/cmp"
)

// cutAt returns an answer cut off at the token cap after tokens tokens.
func cutAt(content string, tokens int64) *llm.Response {
	r := text(content)
	r.FinishReason, r.Usage.CompletionTokens = llm.FinishLength, tokens
	return r
}

func sentMaxTokens(m *scripted) []int {
	var out []int
	for _, r := range m.reqs {
		out = append(out, r.MaxTokens)
	}
	return out
}

// TestTruncation: an answer cut at the token cap (finish reason length) is
// asked again with the cap doubled up to MaxTokensLimit and a request for
// a shorter answer, within MaxRetries; then it fails with a
// *TruncatedError saying what was tried.
func TestTruncation(t *testing.T) {
	cutCall := cutAt("", 100)
	cutCall.Message.ToolCalls = []llm.ToolCall{{ID: "c", Name: "lookup", Arguments: json.RawMessage(`{"q":"lo`)}}
	tests := []struct {
		name      string
		cfg       agent.Config // Model is set by the test
		st        *agent.State // nil: a fresh agent
		answers   []any
		wantMax   []int  // max_tokens sent, in order
		wantOut   string // "" for a failure
		wantErr   string // the failure's message
		wantCuts  int
		wantNotes int // requests for a shorter answer sent
		noSchema  bool
	}{
		{
			name:     "doubled up to four times",
			cfg:      agent.Config{MaxTokens: 100, MaxRetries: 3, MaxTurns: 8},
			answers:  []any{cutAt(`{"n":`, 100), cutAt(`{"n":`, 200), cutAt(`{"n":`, 400), cutAt(`{"n":`, 400)},
			wantMax:  []int{100, 200, 400, 400},
			wantErr:  "answer cut at 100, 200, 400, 400 tokens (finish_reason length) 4 times; max_tokens raised 100→200→400→400",
			wantCuts: 4, wantNotes: 3,
		},
		{
			name:     "limit kept: only a shorter answer asked for",
			cfg:      agent.Config{MaxTokens: 100, MaxTokensLimit: 100},
			answers:  []any{cutAt(`{"n":`, 100), cutAt(`{"n":`, 100), cutAt(`{"n":`, 100)},
			wantMax:  []int{100, 100, 100},
			wantErr:  "answer cut at 100 tokens (finish_reason length) 3 times; max_tokens 100 each time (its limit), with a request for a shorter answer",
			wantCuts: 3, wantNotes: 2,
		},
		{
			name:     "no token cap: backend default",
			cfg:      agent.Config{},
			answers:  []any{cutAt(`{"n":`, 0), text(`{"n":1}`)},
			wantMax:  []int{0, 0},
			wantOut:  `{"n":1}`,
			wantCuts: 1, wantNotes: 1,
		},
		{
			name:    "whole JSON padded to the cap is an answer",
			cfg:     agent.Config{MaxTokens: 10},
			answers: []any{cutAt("{\"n\":3}\n\n\n   ", 10)},
			wantMax: []int{10},
			wantOut: `{"n":3}`,
		},
		{
			name:     "cut tool call asked again",
			cfg:      agent.Config{MaxTokens: 100},
			answers:  []any{cutCall, text(`{"n":2}`)},
			wantMax:  []int{100, 200},
			wantOut:  `{"n":2}`,
			wantCuts: 1, wantNotes: 1,
		},
		{
			name:     "resumed with a raised cap",
			cfg:      agent.Config{MaxTokens: 100},
			st:       &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, MaxTokens: 200, Truncations: 1, Corrections: 1},
			answers:  []any{cutAt(`{"n":`, 200), text(`{"n":5}`)},
			wantMax:  []int{200, 400},
			wantOut:  `{"n":5}`,
			wantCuts: 2, wantNotes: 1,
		},
		{
			// The job's max_tokens was raised after the state was saved
			// (it is not part of the job's fingerprint): the larger cap
			// applies, not the one raised from the old cap.
			name:     "resumed after max_tokens was raised",
			cfg:      agent.Config{MaxTokens: 1000},
			st:       &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, MaxTokens: 200, Truncations: 1, Corrections: 1},
			answers:  []any{text(`{"n":5}`)},
			wantMax:  []int{1000},
			wantOut:  `{"n":5}`,
			wantCuts: 1,
		},
		{
			name:     "resumed after the limit was lowered",
			cfg:      agent.Config{MaxTokens: 100, MaxTokensLimit: 150},
			st:       &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, MaxTokens: 400, Truncations: 2, Corrections: 1},
			answers:  []any{text(`{"n":5}`)},
			wantMax:  []int{150},
			wantOut:  `{"n":5}`,
			wantCuts: 2,
		},
		{
			name:     "no schema: cut text asked again",
			cfg:      agent.Config{MaxTokens: 50},
			answers:  []any{cutAt("Once upon a", 50), text("The end.")},
			wantMax:  []int{50, 100},
			wantOut:  `"The end."`,
			wantCuts: 1, wantNotes: 1,
			noSchema: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scripted{answers: tt.answers}
			cfg := tt.cfg
			cfg.Model = m
			if !tt.noSchema {
				cfg.Schema = mustSchema(t)
			}
			r := newRunner(t, cfg)
			st := tt.st
			if st == nil {
				st = start("go")
			}
			before := len(st.Messages)
			err := r.Run(t.Context(), st)
			if diff := cmp.Diff(tt.wantMax, sentMaxTokens(m)); diff != "" {
				t.Errorf("max_tokens sent (-want +got):\n%s", diff)
			}
			if tt.wantErr != "" {
				te, ok := errors.AsType[*agent.TruncatedError](err)
				if !ok || !errors.Is(err, llm.ErrTruncated) {
					t.Fatalf("Run = %v, want a *TruncatedError", err)
				}
				if te.Error() != tt.wantErr {
					t.Errorf("message = %q, want %q", te.Error(), tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Run = %v", err)
			} else if string(st.Output) != tt.wantOut {
				t.Errorf("output = %s, want %s", st.Output, tt.wantOut)
			}
			if st.Truncations != tt.wantCuts {
				t.Errorf("Truncations = %d, want %d", st.Truncations, tt.wantCuts)
			}
			notes := 0
			for _, msg := range st.Messages[before:] {
				if msg.Role == llm.RoleAssistant && len(msg.ToolCalls) > 0 {
					t.Errorf("a cut tool call was kept in the conversation: %+v", msg)
				}
				if msg.Role == llm.RoleAssistant && msg.Content == "" {
					t.Errorf("an empty assistant message was kept")
				}
				if msg.Role == llm.RoleUser && strings.Contains(msg.Content, "cut off") {
					notes++
				}
			}
			if notes != tt.wantNotes {
				t.Errorf("%d requests for a shorter answer, want %d: %+v", notes, tt.wantNotes, st.Messages)
			}
		})
	}
}
