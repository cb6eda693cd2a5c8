package cli_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/checkpoint"
)

// TestRunMediaChangedSinceLastRun: `batchagent run` of a job with an
// image field saves each image's path and hash in its state file, never
// its bytes. A rerun after an image changed is refused, naming the
// input's line and the path; --force runs that input alone again and
// replaces its result line; the run after it restores all. An image
// deleted is refused the same way, and with --force its input fails with
// kind input naming the path.
func TestRunMediaChangedSinceLastRun(t *testing.T) {
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	for _, name := range []string{"a.png", "b.png", "c.png"} {
		writeTinyPNG(t, filepath.Join(photos, name))
	}
	job := writeFile(t, dir, "job.yaml", `task:
  - text: "Classify {title}."
  - image: "{photo}"
media: {roots: [photos]}
inputs: inputs.csv
output_schema: {type: object, required: [label], properties: {label: {type: string}}}
`)
	writeFile(t, dir, "inputs.csv", "title,photo\nA,a.png\nB,b.png\nC,c.png\n")
	out := filepath.Join(dir, "out.jsonl")
	state := out + ".state.db"
	args := []string{"run", job, "--out", out}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	img, err := os.ReadFile(filepath.Join(photos, "a.png"))
	if err != nil {
		t.Fatal(err)
	}
	checkStateHoldsReferences(t, state, img)

	if code, _, stderr := run(t, t.Context(), args...); code != 0 || !strings.Contains(stderr, "3 restored from the state file; 0 run") {
		t.Fatalf("rerun, nothing changed: exit %d, summary:\n%s\nwant 3 restored", code, stderr)
	}

	// b.png changes: a changed input.
	writePNGSized(t, filepath.Join(photos, "b.png"), 40, 30)
	code, _, stderr := run(t, t.Context(), args...)
	if want := "inputs.csv:3: input 1: b.png changed since the last run"; code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--force") {
		t.Fatalf("rerun, b.png changed: exit %d, stderr:\n%s\nwant exit 2 with %q and --force", code, stderr, want)
	}
	code, _, stderr = run(t, t.Context(), append(args, "--force")...)
	if code != 0 || !strings.Contains(stderr, "2 restored from the state file; 1 run") {
		t.Fatalf("--force, b.png changed: exit %d, summary:\n%s\nwant 2 restored, 1 run", code, stderr)
	}
	checkOneLineEach(t, out, 3)
	if code, _, stderr := run(t, t.Context(), args...); code != 0 || !strings.Contains(stderr, "3 restored from the state file; 0 run") {
		t.Fatalf("rerun after --force: exit %d, summary:\n%s\nwant 3 restored (the new b.png's hash saved)", code, stderr)
	}

	// c.png is deleted: refused, then with --force its input fails alone.
	if err := os.Remove(filepath.Join(photos, "c.png")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, t.Context(), args...)
	if want := "inputs.csv:4: input 2: c.png changed since the last run (no such file under the media roots"; code != 2 || !strings.Contains(stderr, want) {
		t.Fatalf("rerun, c.png gone: exit %d, stderr:\n%s\nwant exit 2 with %q", code, stderr, want)
	}
	if code, _, stderr = run(t, t.Context(), append(args, "--force")...); code == 0 {
		t.Errorf("--force, c.png gone: exit 0, want the status of a failed input; stderr:\n%s", stderr)
	}
	lines := readLines(t, readFileString(t, out))
	if len(lines) != 3 {
		t.Fatalf("%d result lines, want 3", len(lines))
	}
	for _, l := range lines {
		bad := l.Index == 2
		switch {
		case !bad && (l.Error != nil || l.Output["label"] == nil):
			t.Errorf("input %d: %+v, want a label", l.Index, l)
		case bad && (l.Error == nil || l.Error.Kind != "input" || !strings.Contains(l.Error.Message, "c.png: no such file under the media roots")):
			t.Errorf("input %d: error %+v, want kind input naming c.png", l.Index, l.Error)
		}
	}
}

// writePNGSized writes a w×h PNG to path.
func writePNGSized(t *testing.T, path string, w, h int) {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkStateHoldsReferences fails unless every state in the state file
// at path holds its image as a reference (the path and a hash), and none
// holds the bytes img or their base64.
func checkStateHoldsReferences(t *testing.T, path string, img []byte) {
	t.Helper()
	s, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs, err := s.Jobs(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Jobs = %q, %v; want one", jobs, err)
	}
	for i := range 3 {
		st, err := s.State(t.Context(), jobs[0], i)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Media) != 1 || st.Media[0].Hash == "" || len(st.Messages) == 0 {
			t.Fatalf("state %d: media %+v, %d messages; want one reference with a hash", i, st.Media, len(st.Messages))
		}
		line, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(line, img) || bytes.Contains(line, []byte(base64.StdEncoding.EncodeToString(img))) {
			t.Errorf("state %d holds the image's bytes", i)
		}
		if p := st.Messages[0].Parts[1]; p.Data != nil || p.Ref != st.Media[0].Ref || p.Hash != st.Media[0].Hash {
			t.Errorf("state %d: image part %+v, want no bytes, the ref and hash", i, p)
		}
	}
}
