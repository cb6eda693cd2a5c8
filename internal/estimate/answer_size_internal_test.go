package estimate

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/schema"
)

// answerSchemas are output schemas whose short and long answers the tests
// check; the seeds of FuzzSchemaAnswers.
var answerSchemas = []string{
	`{"type":"object","properties":{"label":{"enum":["positive","negative","mixed"]},"reason":{"type":"string","maxLength":120}},"required":["label"]}`,
	`{"type":"object","properties":{"summary":{"type":"string"},"findings":{"type":"array","minItems":1,"maxItems":4,"items":{"type":"object","properties":{"line":{"type":"integer","minimum":1},"severity":{"enum":["low","high"]},"note":{"type":"string","minLength":20}},"required":["line","note"]}}},"required":["summary","findings"]}`,
	`{"$defs":{"tag":{"type":"string","maxLength":12}},"type":"object","properties":{"tags":{"type":"array","items":{"$ref":"#/$defs/tag"}},"when":{"type":"string","format":"date-time"},"score":{"type":["number","null"],"maximum":10}},"required":["tags"]}`,
	`{"anyOf":[{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]},{"type":"object","properties":{"long":{"type":"string"}},"required":["long"]}]}`,
	`{"allOf":[{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]},{"properties":{"b":{"const":"x"}},"required":["b"]}]}`,
	`{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"minItems":2,"maxItems":2}`,
	`{"type":"object","properties":{"name":{"type":"string"},"child":{"$ref":"#"}},"required":["name"]}`,
	`true`,
}

// TestSchemaAnswers: the short and the long answer of each schema are
// valid against it, and the short one is no longer than the long one.
func TestSchemaAnswers(t *testing.T) {
	for _, raw := range answerSchemas {
		s, err := schema.Compile(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("Compile(%s): %v", raw, err)
		}
		short, long, err := schemaAnswers(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("schemaAnswers(%s): %v", raw, err)
		}
		if raw == `true` {
			continue // any value: nothing to check but that it ends
		}
		for _, a := range []string{short, long} {
			if _, err := s.Parse(a); err != nil {
				t.Errorf("schemaAnswers(%s): answer %s is invalid: %v", raw, a, err)
			}
		}
		if len(short) > len(long) {
			t.Errorf("schemaAnswers(%s) = %s, %s: short is longer than long", raw, short, long)
		}
	}
}

// FuzzSchemaAnswers: any JSON schema yields two JSON answers, without
// panicking or looping.
func FuzzSchemaAnswers(f *testing.F) {
	for _, s := range answerSchemas {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return
		}
		short, long, err := schemaAnswers(json.RawMessage(raw))
		if err != nil {
			return
		}
		if !json.Valid([]byte(short)) || !json.Valid([]byte(long)) {
			t.Errorf("schemaAnswers(%s) = %q, %q: not JSON", raw, short, long)
		}
	})
}
