package job_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/job"
)

func BenchmarkRender(b *testing.B) {
	in := job.Input{"name": "user 42", "id": json.Number("42"), "city": "Paris"}
	tests := []struct {
		name string
		text string
	}{
		{"one field", "Write a short greeting for {name}."},
		{"two fields", "Write a short greeting for {name}, customer number {id}."},
	}
	for _, tt := range tests {
		tmpl := mustParse(b, tt.text)
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tmpl.Render(in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tt.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = tmpl.AppendRender(dst[:0], in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
