package prices

// windows maps model names to their context windows in tokens, as
// published on [Dated] (the models' pages at
// https://platform.openai.com/docs/models and
// https://docs.anthropic.com/en/docs/about-claude/models; change Dated with
// them). A window not in the table is unknown: agents then learn it from
// the server's first refusal of a prompt's length.
var windows = map[string]int{
	"gpt-5":             400000,
	"gpt-5-chat":        128000,
	"gpt-5-mini":        400000,
	"gpt-5-nano":        400000,
	"gpt-5-pro":         400000,
	"gpt-4.1":           1047576,
	"gpt-4.1-mini":      1047576,
	"gpt-4.1-nano":      1047576,
	"gpt-4o":            128000,
	"gpt-4o-mini":       128000,
	"o1":                200000,
	"o1-mini":           128000,
	"o1-pro":            200000,
	"o3":                200000,
	"o3-mini":           200000,
	"o3-pro":            200000,
	"o4-mini":           200000,
	"gpt-4-turbo":       128000,
	"gpt-3.5-turbo":     16385,
	"claude-opus-4-5":   200000,
	"claude-opus-4-1":   200000,
	"claude-opus-4":     200000,
	"claude-opus-4-0":   200000,
	"claude-sonnet-4-5": 200000,
	"claude-sonnet-4":   200000,
	"claude-sonnet-4-0": 200000,
	"claude-3-7-sonnet": 200000,
	"claude-3-5-sonnet": 200000,
	"claude-haiku-4-5":  200000,
	"claude-3-5-haiku":  200000,
	"claude-3-haiku":    200000,
	"claude-3-opus":     200000,
}

// ContextWindow returns the context window of model in tokens, as of
// [Dated]; a version suffix or a Bedrock id is resolved as in [Lookup]. It
// reports false for a model not in the table.
func ContextWindow(model string) (int, bool) {
	if w, ok := windows[model]; ok {
		return w, true
	}
	w, ok := windows[base(model)]
	return w, ok
}
