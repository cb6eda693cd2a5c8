package agent

import "testing"

// TestLearnWindowHostileNumbers: a refusal stating numbers no model has
// (a hostile or broken server) is read as stating none, so the learnt
// window stays positive and below what was sent.
func TestLearnWindowHostileNumbers(t *testing.T) {
	const sent, maxTokens = 5000, 1000
	guess := (sent + maxTokens) * 9 / 10
	for _, msg := range []string{
		"This model's maximum context length is 9223372036854775807 tokens. However, you requested 6000 tokens (5 in the messages, 1000 in the completion).",
		"maximum context length is 99999999999999999999999 tokens",
		"prompt is too long: 9223372036854775807 tokens > 9000000000000000000 maximum",
	} {
		if w := learnWindow(msg, sent, maxTokens); w <= 0 || w > guess {
			t.Errorf("learnWindow(%q) = %d, want within (0, %d]", msg, w, guess)
		}
	}
	// A plain statement is still taken as it is.
	if w := learnWindow("maximum context length is 4096 tokens", sent, maxTokens); w != 4096 {
		t.Errorf("learnWindow(4096 stated) = %d, want 4096", w)
	}
}
