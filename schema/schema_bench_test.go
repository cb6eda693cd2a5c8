package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/schema"
)

// benchSchema is the output schema of the hot path: a small object.
const benchSchema = `{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`

const benchDoc = `{"value":3,"first_word":"hello"}`

// nestedBenchSchema is a larger output schema of the simple kind: nested
// objects, arrays, a type list, bounds and an enum.
const nestedBenchSchema = `{"type":"object","properties":{"title":{"type":"string","minLength":1},"author":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":255}},"required":["name","age"],"additionalProperties":false},"tags":{"type":["null","array"],"items":{"type":"string"}},"scores":{"type":"array","items":{"type":"number"},"maxItems":10},"status":{"enum":["draft","final"]}},"required":["title","author","tags","status"],"additionalProperties":false}`

const nestedBenchDoc = `{"title": "A report", "author": {"name": "Ann", "age": 42}, "tags": ["x", "y", "z"], "scores": [1.5, 2, 3e1], "status": "final"}`

func mustCompile(tb testing.TB, raw string) *schema.Schema {
	tb.Helper()
	s, err := schema.Compile(json.RawMessage(raw))
	if err != nil {
		tb.Fatalf("Compile(%s) = %v", raw, err)
	}
	return s
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, benchSchema)
	doc := json.RawMessage(benchDoc)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateNested(b *testing.B) {
	s := mustCompile(b, nestedBenchSchema)
	doc := json.RawMessage(nestedBenchDoc)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateParallel(b *testing.B) {
	s := mustCompile(b, benchSchema)
	doc := json.RawMessage(benchDoc)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Validate(doc); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkValidateInvalid(b *testing.B) {
	s := mustCompile(b, benchSchema)
	doc := json.RawMessage(`{"value":"3","extra":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(doc); err == nil {
			b.Fatal("Validate = nil, want error")
		}
	}
}

func BenchmarkParseBare(b *testing.B) {
	s := mustCompile(b, benchSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Parse(benchDoc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseNested(b *testing.B) {
	s := mustCompile(b, nestedBenchSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Parse(nestedBenchDoc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseFenced(b *testing.B) {
	s := mustCompile(b, benchSchema)
	text := "Here is the answer:\n```json\n{\n  \"value\": 3,\n  \"first_word\": \"hello\"\n}\n```\n"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Parse(text); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractProse(b *testing.B) {
	text := `Sure! I counted the words {carefully} and the result is {"value": 3, "first_word": "hello", "note": "braces } inside \"strings\" are fine"}. Let me know if you need anything else.`
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := schema.Extract(text); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRepaired(b *testing.B) {
	s := mustCompile(b, benchSchema)
	text := "```json\n{\n  \"value\": 3,\n  \"first_word\": \"hello\",\n"
	b.ReportAllocs()
	for b.Loop() {
		if _, repairs, err := s.ParseRepaired(text); err != nil || len(repairs) != 3 {
			b.Fatal(repairs, err)
		}
	}
}

// repairBenchText is a truncated 10 KB answer: 200 objects in an array.
var repairBenchText = `{"items": [` + strings.Repeat(`{"id": 1234, "name": "an item", "tags": ["x", "y"]}, `, 200)

func BenchmarkRepair(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(repairBenchText)))
	for b.Loop() {
		if _, _, ok := schema.Repair(repairBenchText); !ok {
			b.Fatal("Repair refused")
		}
	}
}

func BenchmarkRepairRefused(b *testing.B) {
	text := repairBenchText + `{"id": 12`
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, _, ok := schema.Repair(text); ok {
			b.Fatal("Repair accepted a cut number")
		}
	}
}

func BenchmarkFor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.For[report](); err != nil {
			b.Fatal(err)
		}
	}
}
