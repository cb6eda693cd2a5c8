package job_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/job"
)

func ExampleParseTemplate() {
	tmpl, err := job.ParseTemplate("Summarize {title} for {user.name} ({user.age}). Tags: {tags}. {{literal}}")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tmpl.Fields())

	text, err := tmpl.Render(job.Input{
		"title": "the report",
		"user":  map[string]any{"name": "Ada", "age": 36},
		"tags":  []any{"q3", "finance"},
	})
	fmt.Println(text, err)

	_, err = tmpl.Render(job.Input{"title": "no user"})
	fmt.Println(err)

	_, err = job.ParseTemplate("Hello {name")
	fmt.Println(err)
	// Output:
	// [title user tags]
	// Summarize the report for Ada (36). Tags: ["q3","finance"]. {literal} <nil>
	// template: input has no field "user.name"
	// template: line 1, col 7: unclosed "{" (write "{{" for a literal brace)
}

func ExampleJSONL() {
	const data = `{"id": 1, "name": "Ada"}
{"id": 2, "name": 

{"id": 3, "name": "Grace"}
`
	tmpl, _ := job.ParseTemplate("Greet {name} (row {id})")
	for in, err := range job.JSONL(strings.NewReader(data), "inputs.jsonl") {
		if err != nil {
			var ie *job.InputError
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
