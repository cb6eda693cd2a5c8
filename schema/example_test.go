package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchagent/batchagent/schema"
)

func Example() {
	s, err := schema.Compile(json.RawMessage(`{
		"type": "object",
		"properties": {
			"value": {"type": "integer"},
			"first_word": {"type": "string"}
		},
		"required": ["value", "first_word"],
		"additionalProperties": false
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}

	// A model's answer, JSON in a fenced block with prose around it.
	answer := "Sure! Here it is:\n```json\n{\n  \"value\": 3,\n  \"first_word\": \"hello\"\n}\n```"
	out, err := s.Parse(answer)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))

	// A wrong answer: every problem is reported with its path.
	_, err = s.Parse(`{"value": "three", "note": "close enough"}`)
	var verr *schema.ValidationError
	if errors.As(err, &verr) {
		for _, p := range verr.Problems {
			fmt.Printf("%s: %s\n", p.Path, p.Message)
		}
	}
	// Output:
	// {"value":3,"first_word":"hello"}
	// $: missing required property "first_word"
	// $: property "note" is not allowed
	// $.value: got string, want integer
}

func ExampleFeedback() {
	s, err := schema.Compile(json.RawMessage(`{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = s.Parse(`{"n": 1.5}`)
	if verr, ok := errors.AsType[*schema.ValidationError](err); ok {
		fmt.Println(schema.Feedback(verr))
	}
	// Output:
	// Your answer does not match the required JSON Schema. Problems:
	// - $.n: got number, want integer
	// Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences.
}

func ExampleExtract() {
	raw, err := schema.Extract(`I think {placeholder} is wrong; the answer is {"ok": true}.`)
	fmt.Println(string(raw), err)
	// Output:
	// {"ok": true} <nil>
}

// Invoice is the typed output of Example_for.
type Invoice struct {
	Number string  `json:"number" jsonschema:"the invoice number as printed"`
	Total  float64 `json:"total" jsonschema:"the amount due, in euros"`
	Lines  []Line  `json:"lines"`
	Note   string  `json:"note,omitempty"`
}

// Line is one line of an Invoice.
type Line struct {
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

func Example_for() {
	raw, err := schema.For[Invoice]()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(raw))
	s, err := schema.Compile(raw)
	if err != nil {
		fmt.Println(err)
		return
	}

	// A truncated answer with a trailing comma, repaired before validation.
	answer := "```json\n{\"number\": \"F-1042\", \"total\": 99.5, \"lines\": [{\"item\": \"paper\", \"quantity\": 5},\n"
	out, repairs, err := s.ParseRepaired(answer)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	for _, r := range repairs {
		fmt.Println("-", r)
	}

	var inv Invoice
	if err := json.Unmarshal(out, &inv); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d line(s), total %.2f\n", inv.Number, len(inv.Lines), inv.Total)
	// Output:
	// {"type":"object","properties":{"number":{"type":"string","description":"the invoice number as printed"},"total":{"type":"number","description":"the amount due, in euros"},"lines":{"type":["null","array"],"items":{"type":"object","properties":{"item":{"type":"string"},"quantity":{"type":"integer"}},"required":["item","quantity"],"additionalProperties":false}},"note":{"type":"string"}},"required":["number","total","lines"],"additionalProperties":false}
	// {"number":"F-1042","total":99.5,"lines":[{"item":"paper","quantity":5}]}
	// - removed a Markdown fence
	// - removed a trailing comma
	// - closed 2 unclosed brackets at the end: "]}"
	// F-1042: 1 line(s), total 99.50
}

func ExampleRepair() {
	for _, answer := range []string{
		`{"tags": ["a", "b",], "done": true,}`,
		`{"name": "Ada", "age": 3`,
		`{'name': 'Ada'}`,
	} {
		out, repairs, ok := schema.Repair(answer)
		if !ok {
			fmt.Println("refused:", answer)
			continue
		}
		fmt.Println(string(out), repairs)
	}
	// Output:
	// {"tags":["a","b"],"done":true} [removed 2 trailing commas]
	// refused: {"name": "Ada", "age": 3
	// refused: {'name': 'Ada'}
}

func ExampleCheckError() {
	// A semantic check, for what the schema cannot say.
	var check schema.CheckFunc = func(v json.RawMessage) error {
		var r struct{ Start, End string }
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if r.End < r.Start {
			return fmt.Errorf("end %s is before start %s", r.End, r.Start)
		}
		return nil
	}
	err := check(json.RawMessage(`{"Start": "2025-03-01", "End": "2025-02-01"}`))
	fmt.Println(schema.Feedback(schema.CheckError(err)))
	// Output:
	// Your answer does not match the required JSON Schema. Problems:
	// - $: end 2025-02-01 is before start 2025-03-01
	// Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences.
}
