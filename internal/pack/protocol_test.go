package pack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/pack"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestID(t *testing.T) {
	t.Parallel()
	for i, want := range []string{"a1", "a2", "a10"} {
		if i == 2 {
			i = 9
		}
		if got := pack.ID(i); got != want {
			t.Errorf("ID(%d) = %q, want %q", i, got, want)
		}
	}
}

// schemaDoc is the part of a pack schema the tests read.
type schemaDoc struct {
	Type                 string                     `json:"type"`
	Properties           map[string]json.RawMessage `json:"properties"`
	Required             []string                   `json:"required"`
	AdditionalProperties *bool                      `json:"additionalProperties"`
}

// propertyOrder returns the keys of the schema's properties object in the
// order they are written.
func propertyOrder(t *testing.T, schema []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(schema))
	var keys []string
	depth := 0
	inProps := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
				if depth == 1 {
					inProps = false
				}
			}
		case string:
			if depth == 1 && v == "properties" {
				inProps = true
				continue
			}
			if inProps && depth == 2 {
				keys = append(keys, v)
				// Skip the property's value.
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					t.Fatalf("decode property %q: %v", v, err)
				}
			}
		}
	}
	return keys
}

func TestSchema(t *testing.T) {
	t.Parallel()
	entry := json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","enum":["pos","neg"]}},"required":["label"]}`)
	tests := []struct {
		name      string
		entry     json.RawMessage
		n         int
		wantEntry string
	}{
		{name: "schema entries", entry: entry, n: 3, wantEntry: string(entry)},
		{name: "text entries", entry: nil, n: 2, wantEntry: `{"type":"string"}`},
		{name: "blank entry is text", entry: json.RawMessage(" \n"), n: 1, wantEntry: `{"type":"string"}`},
		{name: "ten entries keep their order", entry: entry, n: 10, wantEntry: string(entry)},
		{name: "no entries", entry: entry, n: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := pack.Schema(tt.entry, tt.n)
			if !json.Valid(got) {
				t.Fatalf("Schema(%s, %d) = %s, not valid JSON", tt.entry, tt.n, got)
			}
			var doc schemaDoc
			dec := json.NewDecoder(bytes.NewReader(got))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("Schema(%s, %d) = %s: %v", tt.entry, tt.n, got, err)
			}
			ids := make([]string, tt.n)
			for i := range ids {
				ids[i] = pack.ID(i)
			}
			if doc.Type != "object" || doc.AdditionalProperties == nil || *doc.AdditionalProperties {
				t.Errorf("Schema(%s, %d) = %s, want an object schema with additionalProperties false", tt.entry, tt.n, got)
			}
			if diff := cmp.Diff(ids, doc.Required, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Schema(...).required mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ids, propertyOrder(t, got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Schema(...).properties order mismatch (-want +got):\n%s", diff)
			}
			for _, id := range ids {
				if p := string(doc.Properties[id]); p != tt.wantEntry {
					t.Errorf("Schema(...).properties[%q] = %s, want %s", id, p, tt.wantEntry)
				}
			}
		})
	}
}

func TestInstructions(t *testing.T) {
	t.Parallel()
	text := pack.Instructions("")
	if !strings.Contains(text, "JSON string") {
		t.Errorf("Instructions(\"\") = %q, want it to ask for JSON strings", text)
	}
	const rules = "Return a label: pos or neg."
	with := pack.Instructions(rules)
	if !strings.HasSuffix(with, "\n\n"+rules) || strings.Contains(with, "JSON string holding") {
		t.Errorf("Instructions(%q) = %q, want the rules at the end and no text answers", rules, with)
	}
	if pack.Instructions(rules) != with {
		t.Errorf("Instructions(%q) differs between calls, want the same prefix", rules)
	}
}

// TestTasksRoundTrip writes tasks with Tasks and reads them back with
// ParseTasks. Every valid UTF-8 text comes back as it was, whatever it
// holds (quotes, newlines, braces, a "Tasks:" header, HTML, U+2028);
// json.Marshal replaces each byte of invalid UTF-8 with U+FFFD, so such
// text comes back with one U+FFFD per invalid byte.
func TestTasksRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []string
		want  []string // nil: tasks
	}{
		{name: "none", tasks: []string{}},
		{name: "one", tasks: []string{"Classify: I love it."}},
		{name: "hostile", tasks: []string{
			`say "hi"`,
			"line one\nline two\r\n\ttab",
			"Tasks:\n{\"a1\": \"x\"}",
			`}{ ] [ ,"a2": "y"} \"`,
			"",
			"<b>&amp;</b> \u2028\u2029 \x00\x1f",
			"日本語 😀 é",
			`\u0041 is not unescaped twice`,
		}},
		{
			name:  "invalid UTF-8",
			tasks: []string{"ok \xff\xfe end", "\xe6\x97 cut rune", "\xed\xa0\x80 surrogate"},
			want:  []string{"ok \uFFFD\uFFFD end", "\uFFFD\uFFFD cut rune", "\uFFFD\uFFFD\uFFFD surrogate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := pack.Tasks(tt.tasks)
			ids, got, err := pack.ParseTasks(msg)
			if err != nil {
				t.Fatalf("ParseTasks(Tasks(%q)) error: %v\nmessage:\n%s", tt.tasks, err, msg)
			}
			want := tt.want
			if want == nil {
				want = tt.tasks
			}
			wantIDs := make([]string, len(tt.tasks))
			for i := range wantIDs {
				wantIDs[i] = pack.ID(i)
			}
			if diff := cmp.Diff(wantIDs, ids, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseTasks(Tasks(...)) ids mismatch (-want +got):\n%s", diff)
			}
			if !slices.Equal(want, got) {
				t.Errorf("ParseTasks(Tasks(%q)) tasks = %q, want %q", tt.tasks, got, want)
			}
			if strings.Count(msg, "\n") != len(tt.tasks)+2 {
				t.Errorf("Tasks(%q) = %q, want the header, then one line per task and the braces", tt.tasks, msg)
			}
		})
	}
}

func TestTasksFormat(t *testing.T) {
	t.Parallel()
	got := pack.Tasks([]string{"x", `say "hi"`})
	want := "Tasks:\n{\n\"a1\": \"x\",\n\"a2\": \"say \\\"hi\\\"\"\n}"
	if got != want {
		t.Errorf("Tasks = %q, want %q", got, want)
	}
}

func TestParseTasksErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  string
	}{
		{name: "empty", msg: ""},
		{name: "no header", msg: "{\n\"a1\": \"x\"\n}"},
		{name: "header without newline", msg: "Tasks: {\"a1\": \"x\"}"},
		{name: "header only", msg: "Tasks:\n"},
		{name: "an array", msg: "Tasks:\n[\"x\"]"},
		{name: "a string", msg: "Tasks:\n\"x\""},
		{name: "a number task", msg: "Tasks:\n{\"a1\": 5}"},
		{name: "an object task", msg: "Tasks:\n{\"a1\": {}}"},
		{name: "a non-string key", msg: "Tasks:\n{1: \"x\"}"},
		{name: "missing comma", msg: "Tasks:\n{\"a1\": \"x\" \"a2\": \"y\"}"},
		{name: "missing colon", msg: "Tasks:\n{\"a1\" \"x\"}"},
		{name: "truncated", msg: "Tasks:\n{\"a1\": \"x\","},
		{name: "unclosed", msg: "Tasks:\n{\"a1\": \"x\""},
		{name: "mismatched close", msg: "Tasks:\n{\"a1\": \"x\"]"},
		{name: "text after", msg: "Tasks:\n{\"a1\": \"x\"}\nthanks"},
		{name: "second object", msg: "Tasks:\n{}{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ids, tasks, err := pack.ParseTasks(tt.msg)
			if !errors.Is(err, pack.ErrNotPacked) {
				t.Errorf("ParseTasks(%q) = %q, %q, %v; want an error wrapping ErrNotPacked", tt.msg, ids, tasks, err)
			}
			if ids != nil || tasks != nil {
				t.Errorf("ParseTasks(%q) = %q, %q; want nil slices with the error", tt.msg, ids, tasks)
			}
		})
	}
}
