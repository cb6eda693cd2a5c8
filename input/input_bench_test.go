package input_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/batchagent/batchagent/input"
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
		for in, err := range input.JSONL(r, "bench.jsonl") {
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
		for _, err := range input.CSV(r, "bench.csv") {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jsonlRows), "ns/row")
}

func BenchmarkCount(b *testing.B) {
	var jsonl, csv bytes.Buffer
	csv.WriteString("id,name,city,score\n")
	for i := range jsonlRows {
		fmt.Fprintf(&jsonl, `{"id":%d,"name":"user %d","city":"Paris","score":%d.5}`+"\n", i, i, i%100)
		fmt.Fprintf(&csv, "%d,user %d,Paris,%d.5\n", i, i, i%100)
	}
	tests := []struct {
		name  string
		data  []byte
		count func(io.Reader) (int, error)
	}{
		{"JSONL", jsonl.Bytes(), input.CountJSONL},
		{"CSV", csv.Bytes(), input.CountCSV},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.data)))
			b.ReportAllocs()
			r := bytes.NewReader(tt.data)
			for b.Loop() {
				r.Reset(tt.data)
				if n, err := tt.count(r); n != jsonlRows || err != nil {
					b.Fatalf("count = %d, %v; want %d, nil", n, err, jsonlRows)
				}
			}
		})
	}
}
