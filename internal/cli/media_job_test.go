package cli_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// writeTinyPNG writes a small PNG to path.
func writeTinyPNG(t *testing.T, path string) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 24, 16))
	for x := range 24 {
		img.Set(x, x%16, color.RGBA{B: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunJobWithImages: `batchagent run` on a job whose task is a list of
// a text and an image part, over a CSV with a photo column, writes one
// result per line; a missing file and a path escaping the media roots
// each fail only their line, with kind input naming inputs.csv:LINE, the
// field and the path, and nothing outside the roots is read.
func TestRunJobWithImages(t *testing.T) {
	dir := t.TempDir()
	writeTinyPNG(t, filepath.Join(dir, "photos", "a.png"))
	writeTinyPNG(t, filepath.Join(dir, "photos", "b.png"))
	writeTinyPNG(t, filepath.Join(dir, "secret.png")) // outside the roots
	job := writeFile(t, dir, "job.yaml", `task:
  - text: "Classify {title}."
  - image: "{photo}"
    detail: low
media: {roots: [photos], max_bytes: 64KiB}
inputs: inputs.csv
output_schema: {type: object, required: [label], properties: {label: {type: string}}}
`)
	writeFile(t, dir, "inputs.csv", "title,photo\nA,a.png\nMissing,missing.png\nB,b.png\nEscape,../secret.png\n")
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", job, "--out", out, "--quiet")
	if code == 0 {
		t.Errorf("run: exit 0, want the failure status of a run with failed inputs; stderr:\n%s", stderr)
	}
	lines := readLines(t, readFileString(t, out))
	if len(lines) != 4 {
		t.Fatalf("%d result lines, want 4; stderr:\n%s", len(lines), stderr)
	}
	want := map[int]string{
		1: `inputs.csv:3: field "photo": missing.png: no such file under the media roots`,
		3: `inputs.csv:5: field "photo": ../secret.png: escapes the media roots`,
	}
	for _, l := range lines {
		msg, bad := want[l.Index]
		switch {
		case !bad && (l.Error != nil || l.Output["label"] == nil):
			t.Errorf("input %d: %+v, want a label", l.Index, l)
		case bad && (l.Error == nil || l.Error.Kind != "input" || !strings.Contains(l.Error.Message, msg)):
			t.Errorf("input %d: error %+v, want kind input containing %q", l.Index, l.Error, msg)
		}
	}
}

// TestRunJobMediaRefusedAtOpen: a job whose backend takes no audio fails
// when it opens, before any input runs, naming the part.
func TestRunJobMediaRefusedAtOpen(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "backend: llamacpp://127.0.0.1:1\ntask:\n  - text: x\n  - audio: \"{clip}\"\ninputs: in.jsonl\n")
	writeFile(t, dir, "in.jsonl", "{\"clip\":\"a.wav\"}\n")
	code, _, stderr := run(t, t.Context(), "run", job, "--out", filepath.Join(dir, "out.jsonl"), "--quiet")
	if code == 0 || !strings.Contains(stderr, "task part 2 (audio {clip}): the backend takes no audio parts as bytes") {
		t.Errorf("run: exit %d, stderr:\n%s\nwant a failure naming the audio part", code, stderr)
	}
}

// TestRunJobHostileMedia: every hostile media reference of issue 30 in one
// run — a path escaping the roots, a symlink out of them, a 2 GiB file, a
// URL to a loopback server (by address and by name), a URL to a private
// address, a data: URL that is not base64, a data: URL and a file whose
// declared type lies — fails its own line only, with kind input naming
// the line, the field and the reason; the good line is answered, the file
// outside the roots (a valid PNG, which would load if reached) is never
// used and the loopback server never receives a request.
func TestRunJobHostileMedia(t *testing.T) {
	dir := t.TempDir()
	writeTinyPNG(t, filepath.Join(dir, "photos", "a.png"))
	writeTinyPNG(t, filepath.Join(dir, "secret.png")) // outside the roots
	if err := os.Symlink(filepath.Join(dir, "secret.png"), filepath.Join(dir, "photos", "link.png")); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "photos", "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(2 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	big.Close()
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, image.NewRGBA(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	jpeg := jb.Bytes()
	if err := os.WriteFile(filepath.Join(dir, "photos", "liar.png"), jpeg, 0o644); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG"))
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	job := writeFile(t, dir, "job.yaml", `task:
  - text: "Classify {title}."
  - image: "{photo}"
media: {roots: [photos], max_bytes: 1MB, fetch: ["127.0.0.1", "localhost", "10.0.0.1"]}
inputs: in.jsonl
output_schema: {type: object, required: [label], properties: {label: {type: string}}}
`)
	cases := []struct{ ref, want string }{
		{"a.png", ""},
		{"../secret.png", `in.jsonl:2: field "photo": ../secret.png: escapes the media roots`},
		{"link.png", `in.jsonl:3: field "photo": link.png: escapes the media roots`},
		{"big.png", `in.jsonl:4: field "photo": big.png: 2147483648 bytes, over the 1 MB cap (media.max_bytes)`},
		{fmt.Sprintf("https://127.0.0.1:%d/x.png", port), "127.0.0.1 is a loopback address"},
		{fmt.Sprintf("https://localhost:%d/x.png", port), "a loopback address"},
		{"https://10.0.0.1/x.png", "10.0.0.1 is a private address"},
		{"data:image/png;base64,***not base64***", `in.jsonl:8: field "photo": data: URL`},
		{"data:image/png;base64," + base64.StdEncoding.EncodeToString(jpeg), "declared image/png but the bytes are image/jpeg"},
		{"liar.png", `in.jsonl:10: field "photo": liar.png: declared image/png but the bytes are image/jpeg`},
	}
	var in strings.Builder
	for i, c := range cases {
		fmt.Fprintf(&in, "{\"title\":\"t%d\",\"photo\":%q}\n", i, c.ref)
	}
	writeFile(t, dir, "in.jsonl", in.String())
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", job, "--out", out, "--quiet")
	if code == 0 {
		t.Errorf("run: exit 0, want the failure status of a run with failed inputs; stderr:\n%s", stderr)
	}
	lines := readLines(t, readFileString(t, out))
	if len(lines) != len(cases) {
		t.Fatalf("%d result lines, want %d; stderr:\n%s", len(lines), len(cases), stderr)
	}
	for _, l := range lines {
		c := cases[l.Index]
		switch {
		case c.want == "" && (l.Error != nil || l.Output["label"] == nil):
			t.Errorf("input %d (%s): %+v, want a label", l.Index, c.ref, l)
		case c.want != "" && (l.Error == nil || l.Error.Kind != "input" || !strings.Contains(l.Error.Message, c.want)):
			t.Errorf("input %d (%.40s): error %+v, want kind input containing %q", l.Index, c.ref, l.Error, c.want)
		case c.want != "" && !strings.Contains(l.Error.Message, fmt.Sprintf("in.jsonl:%d: field \"photo\": ", l.Index+1)):
			t.Errorf("input %d: error %q names no line and field", l.Index, l.Error.Message)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests, want none", n)
	}
}
