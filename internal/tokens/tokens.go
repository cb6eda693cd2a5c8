// Package tokens counts prompt tokens offline with a real BPE tokenizer
// (tiktoken's vocabularies, embedded in github.com/tiktoken-go/tokenizer),
// so that requests can be paced to a tokens-per-minute limit before the
// backend reports real usage.
package tokens

import (
	"fmt"
	"strings"

	"github.com/tiktoken-go/tokenizer"

	"github.com/batchagent/batchagent/llm"
)

// perMessage is the framing overhead chat formats add to each message.
const perMessage = 4

// Counter counts a request's prompt tokens. It is safe for concurrent use.
type Counter struct {
	codec tokenizer.Codec
	known bool // the tokenizer knows the model: codec is its own vocabulary
}

// New returns a Counter for model: its own vocabulary when the tokenizer
// knows the model (OpenAI models), otherwise o200k_base, a fair estimate for
// other modern models whose exact count the backend reports afterwards.
func New(model string) (*Counter, error) {
	codec, err := tokenizer.ForModel(tokenizer.Model(model))
	if err == nil {
		return &Counter{codec: codec, known: true}, nil
	}
	if codec, err = tokenizer.Get(tokenizer.O200kBase); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return &Counter{codec: codec}, nil
}

// Encoding names the vocabulary c counts with, such as "o200k_base".
func (c *Counter) Encoding() string { return c.codec.GetName() }

// Known reports whether the vocabulary is the model's own (an OpenAI
// model the tokenizer knows) rather than o200k_base standing in for it.
func (c *Counter) Known() bool { return c.known }

// Count returns the prompt tokens of req: every message's text and tool
// calls, the tool definitions, and a small framing overhead per message.
// Text the tokenizer rejects is estimated at four bytes a token.
func (c *Counter) Count(req *llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += perMessage + c.Text(m.Content)
		for _, tc := range m.ToolCalls {
			n += c.Text(tc.Name) + c.Text(string(tc.Arguments))
		}
	}
	for _, t := range req.Tools {
		n += c.Text(t.Name) + c.Text(t.Description) + c.Text(string(t.Parameters))
	}
	if req.Output != nil {
		n += c.Text(string(req.Output.Schema))
	}
	return n
}

// Text returns the tokens of the text s alone, without a message's
// framing: what an answer of that text costs in completion tokens. Text
// the tokenizer rejects is estimated at four bytes a token.
func (c *Counter) Text(s string) int {
	if strings.TrimSpace(s) == "" {
		return 0
	}
	k, err := c.codec.Count(s)
	if err != nil {
		return (len(s) + 3) / 4
	}
	return k
}
