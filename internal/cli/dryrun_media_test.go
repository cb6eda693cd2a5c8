package cli_test

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// writeTestPNG writes a blank w×h PNG to path.
func writeTestPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDryRunMedia: a dry run of a job with an image field loads each
// input's image and counts its tokens as the backend bills them, as their
// own row and inside the prompt's; an input whose image is missing or
// outside the media roots is a bad line naming its line, field and path,
// and nothing outside the roots is read.
func TestDryRunMedia(t *testing.T) {
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	if err := os.Mkdir(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestPNG(t, filepath.Join(photos, "big.png"), 1024, 1024)  // openai 765, anthropic 1,399
	writeTestPNG(t, filepath.Join(photos, "mid.png"), 512, 512)    // 255, 350
	writeTestPNG(t, filepath.Join(photos, "small.png"), 100, 100)  // 255, 14
	writeTestPNG(t, filepath.Join(dir, "outside.png"), 2000, 2000) // beside the roots
	in := writeFile(t, dir, "in.jsonl", `{"photo": "big.png"}
{"photo": "mid.png"}
{"photo": "missing.png"}
{"photo": "small.png"}
{"photo": "../outside.png"}
`)
	_, addr := startModelServer(t, 0) // bills media as OpenAI does
	for _, tc := range []struct {
		backend string
		want    int64
	}{{"sim://?seed=1", 765 + 255 + 255}, {"sim://?seed=1&media_tokens=anthropic", 1399 + 350 + 14}, {"sim+http://" + addr, 765 + 255 + 255}} {
		t.Run(strings.SplitN(tc.backend, "?", 2)[0]+strings.Repeat("-anthropic", strings.Count(tc.backend, "anthropic")), func(t *testing.T) {
			job := writeFile(t, dir, "job.yaml", `name: photos
backend: "`+tc.backend+`"
task:
  - text: Classify the photo.
  - image: "{photo}"
media: {roots: [photos]}
inputs: in.jsonl
pricing: {input: 1, output: 2}
`)
			code, stdout, stderr := run(t, t.Context(), "run", job, "--dry-run")
			if code != 1 {
				t.Fatalf("exit %d, want 1 (bad lines); stderr:\n%s", code, stderr)
			}
			for _, want := range []string{in + ":3: ", `field "photo"`, "missing.png", in + ":5: ", "../outside.png"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not name %q:\n%s", want, stderr)
				}
			}
			if !strings.Contains(stdout, "5 inputs in "+in+": 3 ok, 2 bad") {
				t.Errorf("stdout does not count 3 ok, 2 bad:\n%s", stdout)
			}
			row := regexp.MustCompile(`(?m)^  of which media +([0-9,]+) +([0-9,]+) +([0-9,]+)$`).FindStringSubmatch(stdout)
			if want := thousandsOf(tc.want); row == nil || row[1] != want || row[2] != want || row[3] != want {
				t.Errorf("media row %q, want %s three times:\n%s", row, want, stdout)
			}

			code, stdout, _ = run(t, t.Context(), "run", job, "--dry-run", "--json")
			rep := readDryReport(t, stdout)
			if code != 1 || rep.InputsOK != 3 || rep.MediaTokens == nil || rep.MediaTokens.Estimate != tc.want || rep.MediaTokens.Low != tc.want || rep.MediaTokens.High != tc.want {
				t.Fatalf("--json: exit %d, %d ok, media tokens %+v; want 1, 3 ok, %d", code, rep.InputsOK, rep.MediaTokens, tc.want)
			}
			if rep.PromptTokens.Estimate <= tc.want || rep.TaskTokens.Max <= 255 {
				t.Errorf("prompt tokens %d, task tokens %+v: want the media inside them", rep.PromptTokens.Estimate, rep.TaskTokens)
			}

			// The real run bills what the dry run counted.
			_, out, errOut := run(t, t.Context(), "run", job, "--no-state")
			if want := "media tokens: " + strconv.FormatInt(tc.want, 10) + ", "; !strings.Contains(errOut, want) {
				t.Errorf("the run's summary lacks %q:\n%s", want, errOut)
			}
			var media int64
			for _, m := range regexp.MustCompile(`"media_tokens":([0-9]+)`).FindAllStringSubmatch(out, -1) {
				n, err := strconv.ParseInt(m[1], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				media += n
			}
			if media != tc.want {
				t.Errorf("the run billed %d media tokens, the dry run counted %d:\n%s", media, tc.want, out)
			}
		})
	}
}

// thousandsOf writes n with thousands separators, as the dry run's table.
func thousandsOf(n int64) string {
	d := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
