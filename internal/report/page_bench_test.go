package report_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/batchagent/batchagent/internal/report"
)

// BenchmarkWrite draws the report of runs of n agents of two turns each:
// the live view renders this once a second.
func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		d := sampleData(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := report.Write(io.Discard, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
