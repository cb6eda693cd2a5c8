package sim

import (
	"strings"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// PromptTokens is the simulator's count of req's prompt tokens under the
// default media billing (OpenAI's): the llm.Usage.PromptTokens that a
// [Model] of a zero [Config] reports for req. See [BilledPromptTokens].
func PromptTokens(req *llm.Request) int { return BilledPromptTokens(req, media.DefaultBilling) }

// BilledPromptTokens is the simulator's count of req's prompt tokens, the
// llm.Usage.PromptTokens that a [Model] whose Config.MediaTokens is b
// reports for req. It counts the bytes of every message's text (content
// and text parts) and tool calls (name and arguments) and of the tool
// definitions (name, description, parameters), at [BytesPerToken] bytes
// a token, and adds each media part's tokens as provider b bills them
// ([media.Tokens]); the output schema is not counted. A dry run counts
// with it so that its prompt tokens on sim:// are the simulator's own.
// A text-only request costs one pass over its messages and no allocation.
func BilledPromptTokens(req *llm.Request, b media.Billing) int {
	return Tokens(req.TextBytes()) + MediaTokens(req, b)
}

// MediaTokens is the part of [BilledPromptTokens] that is media: each
// media part's tokens as provider b bills them ([media.Tokens]), the
// llm.Usage.MediaTokens a [Model] whose Config.MediaTokens is b reports.
// A text-only request costs one pass over its messages and no allocation.
func MediaTokens(req *llm.Request, b media.Billing) int {
	n := 0
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		for j := range parts {
			n += media.Tokens(&parts[j], b)
		}
	}
	return n
}

// hasMedia reports whether a message of req carries content parts.
func hasMedia(req *llm.Request) bool {
	for i := range req.Messages {
		if len(req.Messages[i].Parts) > 0 {
			return true
		}
	}
	return false
}

// TextTokens is the simulator's count of the completion tokens of an
// answer whose text (or tool calls' names and arguments together) is s:
// [Tokens] of its bytes.
func TextTokens(s string) int { return Tokens(len(s)) }

// partsText joins the text parts of a message's parts, the task of a
// message that carries media.
func partsText(parts []llm.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == llm.PartText {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
