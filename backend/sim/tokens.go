package sim

import "github.com/batchagent/batchagent/llm"

// PromptTokens is the simulator's count of req's prompt tokens: the
// llm.Usage.PromptTokens that [Model] reports for req. It counts the bytes
// of every message's text and tool calls (name and arguments) and of the
// tool definitions (name, description, parameters), at [BytesPerToken]
// bytes a token; the output schema is not counted. A dry run counts with
// it so that its prompt tokens on sim:// are the simulator's own.
func PromptTokens(req *llm.Request) int { return Tokens(req.TextBytes()) }

// TextTokens is the simulator's count of the completion tokens of an
// answer whose text (or tool calls' names and arguments together) is s:
// [Tokens] of its bytes.
func TextTokens(s string) int { return Tokens(len(s)) }
