package prices

// windows maps model names to their context windows in tokens, as
// published on [Dated] (the models' pages at
// https://platform.openai.com/docs/models and
// https://docs.anthropic.com/en/docs/about-claude/models; change Dated with
// them). A window not in the table is unknown: agents then learn it from
// the server's first refusal of a prompt's length.
var windows = map[string]int{
	"gpt-4o":            128000,
	"gpt-4o-mini":       128000,
	"gpt-4.1":           1047576,
	"gpt-4.1-mini":      1047576,
	"gpt-4.1-nano":      1047576,
	"claude-3-5-haiku":  200000,
	"claude-3-7-sonnet": 200000,
	"claude-sonnet-4":   200000,
	"claude-opus-4":     200000,
}

// ContextWindow returns the context window of model in tokens, as of
// [Dated]; a version suffix is ignored as in [Lookup]. It reports false for
// a model not in the table.
func ContextWindow(model string) (int, bool) {
	if w, ok := windows[model]; ok {
		return w, true
	}
	w, ok := windows[version.ReplaceAllString(model, "")]
	return w, ok
}
