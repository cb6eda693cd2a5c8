package cli_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
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
