package schema_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/schema"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // "" means ErrNoJSON
	}{
		{name: "bare object", in: `{"a":1}`, want: `{"a":1}`},
		{name: "bare object with surrounding space", in: " \n\t{\"a\": 1}\n\n", want: `{"a": 1}`},
		{name: "bare array", in: `[1, {"a": 2}]`, want: `[1, {"a": 2}]`},
		{
			name: "fenced json",
			in:   "Here is the result:\n```json\n{\n  \"a\": 1\n}\n```\nHope this helps!",
			want: "{\n  \"a\": 1\n}",
		},
		{name: "fenced JSON upper case", in: "```JSON\n{\"a\":1}\n```", want: `{"a":1}`},
		{name: "fenced without language", in: "Result:\n```\n{\"a\":1}\n```", want: `{"a":1}`},
		{name: "fenced unclosed", in: "```json\n{\"a\":1}\n", want: `{"a":1}`},
		{
			name: "fence of another language skipped",
			in:   "```python\nprint({'a': 1})\n```\nAnswer:\n```json\n{\"b\":2}\n```",
			want: `{"b":2}`,
		},
		{
			name: "invalid fence then valid fence",
			in:   "```json\n{\"a\": 1,}\n```\nfixed:\n```json\n{\"a\": 1}\n```",
			want: `{"a": 1}`,
		},
		{name: "one-line fence", in: "```json {\"a\":1}```", want: `{"a":1}`},
		{
			name: "fence inside a JSON string",
			in:   "```json\n{\"code\": \"```go\\nx := 1\\n```\"}\n```",
			want: "{\"code\": \"```go\\nx := 1\\n```\"}",
		},
		{name: "prose before", in: `The answer is {"a": 1}`, want: `{"a": 1}`},
		{name: "prose after", in: `{"a": 1} is the answer.`, want: `{"a": 1}`},
		{name: "prose around", in: "Sure.\n{\"a\": 1}\nAnything else?", want: `{"a": 1}`},
		{
			name: "braces inside strings",
			in:   `ok: {"a": "}{", "b": {"c": "]"}} bye`,
			want: `{"a": "}{", "b": {"c": "]"}}`,
		},
		{
			name: "escaped quotes",
			in:   `x {"a": "say \"hi\" }", "b": "\\"} y`,
			want: `{"a": "say \"hi\" }", "b": "\\"}`,
		},
		{name: "placeholder before the value", in: `Use {name} like {"name": "x"}`, want: `{"name": "x"}`},
		{name: "first balanced span invalid", in: `{"a": {"b": 1}, oops}`, want: `{"b": 1}`},
		{name: "quote in prose before", in: `He typed "{" then {"a": 1}`, want: `{"a": 1}`},
		{name: "two objects", in: `First {"a": 1} then {"b": 2}`, want: `{"a": 1}`},
		{name: "array of objects in prose", in: `Results: [{"a":1},{"a":2}] done`, want: `[{"a":1},{"a":2}]`},
		{name: "object preferred to earlier array", in: `See [1] and {"a": 1}.`, want: `{"a": 1}`},
		{name: "array when no object", in: `The numbers are [1, 2, 3].`, want: `[1, 2, 3]`},
		{name: "scalar number", in: `42`},
		{name: "scalar string", in: `"hello"`},
		{name: "no JSON", in: `I cannot help with that.`},
		{name: "empty", in: ``},
		{name: "only space", in: " \n "},
		{name: "unbalanced", in: `{"a": 1`},
		{name: "trailing comma", in: `{"a": 1,}`},
		{name: "single quotes", in: `{'a': 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := schema.Extract(tt.in)
			if tt.want == "" {
				if !errors.Is(err, schema.ErrNoJSON) {
					t.Fatalf("Extract(%q) = %q, %v, want ErrNoJSON", tt.in, got, err)
				}
				if got != nil {
					t.Errorf("Extract(%q) = %q, want nil with the error", tt.in, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Extract(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestExtractManyOpenBraces checks that the search stays fast on input full of
// unbalanced brackets and quotes (each case takes milliseconds).
func TestExtractManyOpenBraces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // "" means ErrNoJSON
	}{
		{name: "value after open braces", in: strings.Repeat("{", 200_000) + `{"a": 1}` + strings.Repeat(`"{`, 50_000), want: `{"a": 1}`},
		{name: "braces and quotes", in: strings.Repeat(`{"{`, 100_000)},
		{name: "nested unclosed", in: strings.Repeat(`{"a":[`, 50_000)},
		{name: "quoted braces in arrays", in: strings.Repeat(`["{`, 100_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := schema.Extract(tt.in)
			if tt.want == "" {
				if !errors.Is(err, schema.ErrNoJSON) {
					t.Fatalf("Extract(%.20q...) = %.20q, %v, want ErrNoJSON", tt.in, got, err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Extract(%.20q...) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestExtractReturnsCopy(t *testing.T) {
	t.Parallel()
	in := `Answer: {"a": 1}`
	got, err := schema.Extract(in)
	if err != nil {
		t.Fatalf("Extract(%q) = %v", in, err)
	}
	got[0] = 'X'
	again, err := schema.Extract(in)
	if err != nil || string(again) != `{"a": 1}` {
		t.Fatalf("Extract(%q) after modifying the first result = %q, %v, want %q", in, again, err, `{"a": 1}`)
	}
}

// modelAnswers are realistic model outputs, used as fuzz seeds.
var modelAnswers = []string{
	`{"value":3,"first_word":"hello"}`,
	"```json\n{\n  \"value\": 3,\n  \"first_word\": \"hello\"\n}\n```",
	"Sure! Here is the JSON you asked for:\n\n```json\n{\"value\": 3, \"first_word\": \"hello\"}\n```\n\nLet me know if you need anything else.",
	"The sentence has 3 words. {\"value\": 3, \"first_word\": \"The\"}",
	`I think {value} should be 3, so: {"value": 3, "first_word": "I"}`,
	`{"value": "3", "first_word": null}`,
	`[{"name": "a", "score": 0.5}, {"name": "b", "score": 1e3}]`,
	`{"text": "quote \" and brace } and unicode \u00e9 \ud83d\ude00", "n": -0.0}`,
	"```\n[1, 2, 3]\n```",
	`{"a": {"b": [1, 2, {"c": "}"}]}, "d": true, "e": false, "f": null}`,
	`I'm sorry, I can't produce JSON for that.`,
	`{"value": 3, "first_word": "hi",}`,
	"{\"value\": 3\n",
	`{"odd key": 1, "0": 2, "": 3}`,
	"\xff{\"a\":\"\xfe\"}",
	"",
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range modelAnswers {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := schema.Extract(in)
		if err != nil {
			if !errors.Is(err, schema.ErrNoJSON) || got != nil {
				t.Fatalf("Extract(%q) = %q, %v, want nil, ErrNoJSON", in, got, err)
			}
			if trimmed := strings.TrimSpace(in); strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
				t.Fatalf("Extract(%q) = %v, want the whole text", in, err)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Extract(%q) = %q, not valid JSON", in, got)
		}
		if got[0] != '{' && got[0] != '[' {
			t.Fatalf("Extract(%q) = %q, want an object or array", in, got)
		}
		if !strings.Contains(in, string(got)) {
			t.Fatalf("Extract(%q) = %q, not a substring of the input", in, got)
		}
	})
}
