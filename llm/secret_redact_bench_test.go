package llm_test

import (
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// BenchmarkRedact measures a Redactor on a 2 KB server error message (the
// size backends keep): without the key, the common case, it must not
// allocate.
func BenchmarkRedact(b *testing.B) {
	const key = "sk-test-secret-0123456789"
	r := llm.Secret(key).Redactor()
	absent := strings.Repeat(`{"error":{"message":"The model is overloaded, please retry later.","type":"server_error","code":503}} `, 20)[:2000]
	present := absent[:1000] + strings.ToUpper(key) + absent[1000+len(key):]
	for _, bc := range []struct{ name, text string }{{"absent", absent}, {"present", present}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Redact(bc.text)
			}
		})
	}
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = llm.Secret(key).Redactor()
		}
	})
}
