package input_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

func ExampleJSONL() {
	const data = `{"id": 1, "name": "Ada"}
{"id": 2, "name": 

{"id": 3, "name": "Grace"}
`
	tmpl, _ := job.ParseTemplate("Greet {name} (row {id})")
	for in, err := range input.JSONL(strings.NewReader(data), "inputs.jsonl") {
		if err != nil {
			var ie *input.Error
			if errors.As(err, &ie) {
				fmt.Println("skip line", ie.Line, "-", err)
			}
			continue
		}
		text, err := tmpl.Render(in)
		fmt.Println(text, err)
	}
	// Output:
	// Greet Ada (row 1) <nil>
	// skip line 2 - inputs.jsonl:2: invalid JSON: unexpected end of JSON input
	// Greet Grace (row 3) <nil>
}
