package config

import "testing"

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"name", "task", "tools", "max_turns", "max_retries"}
	tests := []struct{ in, want string }{
		{"taks", "task"},
		{"Task", "task"},
		{"tool", "tools"},
		{"max_turn", "max_turns"},
		{"max_retires", "max_retries"},
		{"max_retry", ""}, // three edits away
		{"prompt", ""},
		{"t", ""},  // one letter is not a near miss of anything
		{"ab", ""}, // nor is a distance as long as the key
	}
	for _, tt := range tests {
		if got := suggest(tt.in, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
