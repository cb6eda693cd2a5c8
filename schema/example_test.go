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
