package filetool_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/tool/filetool"
)

// BenchmarkListDir lists a directory of 200 files.
func BenchmarkListDir(b *testing.B) {
	root := b.TempDir()
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("file%03d.go", i)), []byte("package x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ld, err := filetool.ListDir(filetool.ListDirConfig{Roots: []string{root}})
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ld.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFile reads text files of 4 KiB and 60 KiB.
func BenchmarkReadFile(b *testing.B) {
	for _, size := range []int{4 << 10, 60 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			root := b.TempDir()
			if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte(strings.Repeat("lorem ipsum\n", size/12+1)[:size]), 0o644); err != nil {
				b.Fatal(err)
			}
			rf, err := filetool.ReadFile(filetool.ReadFileConfig{Roots: []string{root}})
			if err != nil {
				b.Fatal(err)
			}
			args := json.RawMessage(`{"path":"f.txt"}`)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				got, err := rf.Call(b.Context(), args)
				if err != nil || len(got) != size {
					b.Fatalf("read_file(f.txt) = %d bytes, %v, want %d bytes, nil", len(got), err, size)
				}
			}
		})
	}
}
