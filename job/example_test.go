package job_test

import (
	"fmt"

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
