package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/batchagent/batchagent/llm"
)

// TruncatedError reports an agent whose answers were cut off at the token
// cap (finish reason length) every time it was asked again, up to its
// correction limit. It wraps [llm.ErrTruncated].
type TruncatedError struct {
	// Tokens are the completion tokens of each cut answer, as the backend
	// reported them; zero where it did not.
	Tokens []int64
	// MaxTokens are the token caps sent with those calls; zero where the
	// backend's default applied.
	MaxTokens []int
}

// Error says how often the answer was cut, where, and what was tried:
// "answer cut at 48 tokens (finish_reason length) 3 times; max_tokens
// raised 48→96→192".
func (e *TruncatedError) Error() string {
	var b strings.Builder
	b.WriteString("answer cut at ")
	switch {
	case allSame(e.Tokens) && len(e.Tokens) > 0 && e.Tokens[0] > 0:
		b.WriteString(strconv.FormatInt(e.Tokens[0], 10))
		b.WriteString(" tokens")
	case allSame(e.Tokens):
		b.WriteString("the token cap")
	default:
		for i, n := range e.Tokens {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.FormatInt(n, 10))
		}
		b.WriteString(" tokens")
	}
	fmt.Fprintf(&b, " (finish_reason length) %d %s; ", len(e.Tokens), plural(len(e.Tokens), "time", "times"))
	switch {
	case len(e.MaxTokens) == 0 || allSame(e.MaxTokens) && e.MaxTokens[0] <= 0:
		b.WriteString("max_tokens: the backend's default, so only asked for a shorter answer")
	case len(e.MaxTokens) == 1:
		fmt.Fprintf(&b, "max_tokens %d", e.MaxTokens[0])
	case allSame(e.MaxTokens):
		fmt.Fprintf(&b, "max_tokens %d each time (its limit), with a request for a shorter answer", e.MaxTokens[0])
	default:
		b.WriteString("max_tokens raised ")
		for i, n := range e.MaxTokens {
			if i > 0 {
				b.WriteString("→")
			}
			b.WriteString(strconv.Itoa(n))
		}
	}
	return b.String()
}

// Unwrap returns [llm.ErrTruncated].
func (e *TruncatedError) Unwrap() error { return llm.ErrTruncated }

func allSame[T comparable](s []T) bool {
	for _, v := range s {
		if v != s[0] {
			return false
		}
	}
	return true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// maxTokens returns the token cap of st's next call: the one raised after
// a truncated answer, else the configured one. A state saved under other
// caps (a resumed run whose job changed them) keeps within the current
// ones: never below MaxTokens, never above MaxTokensLimit.
func (r *Runner) maxTokens(st *State) int {
	if st.MaxTokens > r.cfg.MaxTokens {
		return min(st.MaxTokens, r.cfg.MaxTokensLimit)
	}
	return r.cfg.MaxTokens
}

// raise returns the token cap that follows budget after a truncated
// answer: twice it, up to Config.MaxTokensLimit. Without a cap (the
// backend's default) there is nothing to raise.
func (r *Runner) raise(budget int) int {
	if budget <= 0 {
		return budget
	}
	return max(min(budget*2, r.cfg.MaxTokensLimit), budget)
}

// cut reports whether resp was cut off at the token cap and must be asked
// again: its finish reason is length, unless it is a final answer whose
// whole text is a JSON value (a grammar-constrained model that ended its
// value, then padded it up to the cap): that one is validated as usual.
func (r *Runner) cut(resp *llm.Response) bool {
	if resp.FinishReason != llm.FinishLength {
		return false
	}
	if len(resp.Message.ToolCalls) > 0 || r.cfg.Schema == nil {
		return true
	}
	return !json.Valid([]byte(strings.TrimSpace(resp.Message.Content)))
}

// cuts records the truncated answers of one Run, for its error.
type cuts struct {
	tokens    []int64
	maxTokens []int
}

// retryCut handles resp, an answer of turn cut off at the token cap
// (see cut): it appends the cut answer and a request for a shorter one to
// the conversation, raises the token cap for the agent's later calls, and
// counts a truncation and a correction. When the corrections are used up
// it returns an *Error wrapping a *TruncatedError instead.
func (r *Runner) retryCut(ctx context.Context, st *State, c *cuts, turn int, resp *llm.Response) error {
	budget := r.maxTokens(st)
	c.tokens = append(c.tokens, resp.Usage.CompletionTokens)
	c.maxTokens = append(c.maxTokens, budget)
	st.Truncations++
	msg := llm.Message{Role: llm.RoleAssistant, Content: resp.Message.Content}
	if strings.TrimSpace(msg.Content) == "" {
		msg.Content = "[answer cut off]" // some backends refuse an empty message
	}
	// The cut tool calls are dropped: their arguments are incomplete, and a
	// call in the conversation would need a result.
	st.Messages = append(st.Messages, msg)
	st.Raw = resp.Message.Content
	if st.Corrections >= r.cfg.MaxRetries {
		return &Error{Op: "generate", Turn: turn, Err: &TruncatedError{Tokens: c.tokens, MaxTokens: c.maxTokens}}
	}
	st.Corrections++
	if next := r.raise(budget); next != r.cfg.MaxTokens {
		st.MaxTokens = next
	}
	st.Messages = append(st.Messages, llm.Message{Role: llm.RoleUser, Content: r.cutNote(resp, budget)})
	r.turnDone(ctx, st)
	return nil
}

// cutNote is the request for a shorter answer that follows a cut one.
func (r *Runner) cutNote(resp *llm.Response, budget int) string {
	at := "at the length limit"
	switch {
	case resp.Usage.CompletionTokens > 0:
		at = fmt.Sprintf("at %d tokens", resp.Usage.CompletionTokens)
	case budget > 0:
		at = fmt.Sprintf("at %d tokens", budget)
	}
	switch {
	case len(resp.Message.ToolCalls) > 0:
		return "Your previous answer was cut off " + at + " while writing a tool call. Try again with shorter arguments, or answer directly."
	case r.cfg.Schema != nil:
		return "Your previous answer was cut off " + at + ". Answer again, shorter, with only the JSON value and no other text."
	default:
		return "Your previous answer was cut off " + at + ". Answer again, more briefly."
	}
}
