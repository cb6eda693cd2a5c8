package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/config"
)

func BenchmarkParse(b *testing.B) {
	dir := b.TempDir()
	if err := mkdirAll(filepath.Join(dir, "docs")); err != nil {
		b.Fatal(err)
	}
	other := b.TempDir()
	data := []byte(strings.ReplaceAll(fullJob, "$OTHER", other))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Parse(data, "job.yaml", dir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseProblems(b *testing.B) {
	data := []byte("name: demo\ntask: [a, b]\ntaks: x\nlimits:\n  max_turns: abc\n  max_inflight: -1\n  max_turnz: 3\n  timeout: 30\ntools:\n  - name: web_search\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Parse(data, "job.yaml", "/jobs"); err == nil {
			b.Fatal("Parse() error = nil, want problems")
		}
	}
}
