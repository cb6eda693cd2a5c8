package filetool_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
)

// pngBytes encodes a w×h PNG.
func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.NRGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pdf2 is a minimal PDF of two pages.
const pdf2 = "%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" +
	"2 0 obj << /Type /Pages /Count 2 >> endobj\n" +
	"3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n" +
	"4 0 obj <</Type/Page/Parent 2 0 R>> endobj\n%%EOF\n"

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestReadFileMedia: an image and a PDF under the roots come back as a
// media part with a short text; through a Pool too.
func TestReadFileMedia(t *testing.T) {
	dir := t.TempDir()
	img := pngBytes(t, 64, 48)
	writeFiles(t, dir, map[string]string{"photos/cat.png": string(img), "docs/invoice.pdf": pdf2})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{dir}})
	mt, ok := rf.(tool.MediaTool)
	if !ok {
		t.Fatalf("read_file %T is not a tool.MediaTool", rf)
	}
	tests := []struct {
		path string
		text string
		part llm.Part
	}{
		{"photos/cat.png", "photos/cat.png: image/png, 64×48", llm.Part{Kind: llm.PartImage, Data: img, MediaType: "image/png",
			Width: 64, Height: 48, Filename: "cat.png", Ref: "photos/cat.png", Hash: hashOf(img)}},
		{"docs/invoice.pdf", "docs/invoice.pdf: application/pdf, 2 pages", llm.Part{Kind: llm.PartFile, Data: []byte(pdf2),
			MediaType: "application/pdf", Pages: 2, Filename: "invoice.pdf", Ref: "docs/invoice.pdf", Hash: hashOf([]byte(pdf2))}},
	}
	p, err := tool.NewPool([]tool.Tool{rf}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			text, media, err := mt.CallMedia(t.Context(), pathArgs(tt.path))
			if err != nil || text != tt.text {
				t.Fatalf("CallMedia(%s) = %q, %v; want %q, nil", tt.path, text, err, tt.text)
			}
			if diff := cmp.Diff([]llm.Part{tt.part}, media); diff != "" {
				t.Errorf("CallMedia(%s) media mismatch (-want +got):\n%s", tt.path, diff)
			}
			text, media, err = p.CallMedia(t.Context(), "read_file", pathArgs(tt.path))
			if err != nil || text != tt.text || len(media) != 1 || media[0].Hash != tt.part.Hash {
				t.Errorf("Pool.CallMedia(%s) = %q, %d parts, %v; want %q, one part with hash %s", tt.path, text, len(media), err, tt.text, tt.part.Hash)
			}
			if _, err := rf.Call(t.Context(), pathArgs(tt.path)); err == nil || !strings.Contains(err.Error(), "binary file ("+tt.part.MediaType+")") {
				t.Errorf("Call(%s) error = %v, want a binary file (%s) error", tt.path, err, tt.part.MediaType)
			}
		})
	}
}

// TestReadFileMediaRefused: media over MaxMediaBytes, a malformed image,
// a symbolic link out of the roots and other binary files are errors
// naming the reason; a text file keeps MaxBytes.
func TestReadFileMediaRefused(t *testing.T) {
	outside := t.TempDir()
	img := pngBytes(t, 300, 300)
	if err := os.WriteFile(filepath.Join(outside, "secret.png"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"big.png":    string(img),
		"broken.png": "\x89PNG\r\n\x1a\nnot really",
		"blob.bin":   "\x00\x01\x02binary",
		"notes.txt":  strings.Repeat("x", 200),
		"escape.png": "->" + filepath.Join(outside, "secret.png"),
	})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{dir}, MaxBytes: 100, MaxMediaBytes: int64(len(img) - 1)})
	mt := rf.(tool.MediaTool)
	tests := []struct{ path, want string }{
		{"big.png", `path "big.png": file is ` + itoa(len(img)) + ` bytes, over the limit of ` + itoa(len(img)-1) + ` bytes for images and PDFs`},
		{"broken.png", `path "broken.png": not a valid image or PDF: `},
		{"blob.bin", `path "blob.bin": binary file`},
		{"notes.txt", `path "notes.txt": file is 200 bytes, over the limit of 100 bytes`},
		{"escape.png", `path "escape.png": path escapes the allowed roots`},
		{"../secret.png", `path "../secret.png": path escapes the allowed roots`},
	}
	for _, tt := range tests {
		text, media, err := mt.CallMedia(t.Context(), pathArgs(tt.path))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || media != nil || text != "" {
			t.Errorf("CallMedia(%s) = %q, %v, %v; want an error starting %q", tt.path, text, media, err, tt.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
