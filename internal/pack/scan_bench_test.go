package pack_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/pack"
)

// BenchmarkScanner reads a 50-entry answer of small objects, fenced as
// models write it, fed in 16-byte pieces as a stream delivers it.
func BenchmarkScanner(b *testing.B) {
	var a strings.Builder
	a.WriteString("```json\n{\n")
	for i := range 50 {
		if i > 0 {
			a.WriteString(",\n")
		}
		fmt.Fprintf(&a, `  %q: {"label": "positive", "score": 0.%02d, "reason": "says \"great\" {twice}", "tags": ["a", "b"]}`, pack.ID(i), i)
	}
	a.WriteString("\n}\n```")
	answer := a.String()
	pieces := split(answer, []byte{16})
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		var s pack.Scanner
		n := 0
		for _, p := range pieces {
			s.Write(p, func(e pack.Entry) {
				if e.Err != nil {
					b.Fatal(e.Err)
				}
				n++
			})
		}
		if n != 50 || !s.Closed() {
			b.Fatalf("read %d entries, Closed() = %t; want 50, true", n, s.Closed())
		}
	}
}
