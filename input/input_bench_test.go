package job_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/batchagent/batchagent/job"
)

// jsonlRows is the number of rows per op in BenchmarkJSONL.
const jsonlRows = 1000

func BenchmarkJSONL(b *testing.B) {
	var buf bytes.Buffer
	for i := range jsonlRows {
		fmt.Fprintf(&buf, `{"id":%d,"name":"user %d","city":"Paris","score":%d.5}`+"\n", i, i, i%100)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := bytes.NewReader(data)
	for b.Loop() {
		r.Reset(data)
		n := 0
		for in, err := range job.JSONL(r, "bench.jsonl") {
			if err != nil || in == nil {
				b.Fatalf("JSONL yielded %v, %v", in, err)
			}
			n++
		}
		if n != jsonlRows {
			b.Fatalf("JSONL yielded %d rows, want %d", n, jsonlRows)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jsonlRows), "ns/row")
}

func BenchmarkCSV(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("id,name,city,score\n")
	for i := range jsonlRows {
		fmt.Fprintf(&buf, "%d,user %d,Paris,%d.5\n", i, i, i%100)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := bytes.NewReader(data)
	for b.Loop() {
		r.Reset(data)
		for _, err := range job.CSV(r, "bench.csv") {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jsonlRows), "ns/row")
}

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
