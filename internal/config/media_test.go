package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool/filetool"
)

func TestParseTaskParts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	photos := mkdir(t, dir, "photos")
	j, err := config.Parse([]byte(`task:
  - text: "Describe {title}."
  - image: "{photo}"
    detail: low
  - text: Then classify it.
  - audio: "{clip}"
  - file: "scans/{id}.pdf"
media: {roots: [photos], max_bytes: 512KiB, fetch: [cdn.example.com, "*.example.org"], pass_urls: true}
`), "job.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Describe {title}.\n\nThen classify it."; j.Def.Task != want {
		t.Errorf("Task = %q, want %q", j.Def.Task, want)
	}
	wantMedia := []job.MediaField{
		{Kind: llm.PartImage, Ref: "{photo}", Detail: "low"},
		{Kind: llm.PartAudio, Ref: "{clip}"},
		{Kind: llm.PartFile, Ref: "scans/{id}.pdf"},
	}
	if diff := cmp.Diff(wantMedia, j.Def.Media); diff != "" {
		t.Errorf("Media mismatch (-want +got):\n%s", diff)
	}
	wantCfg := &config.MediaConfig{Roots: []string{photos}, MaxBytes: 512 << 10, Fetch: []string{"cdn.example.com", "*.example.org"}, PassURLs: true}
	if diff := cmp.Diff(wantCfg, j.Media); diff != "" {
		t.Errorf("Media config mismatch (-want +got):\n%s", diff)
	}
}

func TestParseTaskMediaOnlyDefaultRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := config.Parse([]byte("task: [{image: \"{photo}\"}]\n"), "job.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	if j.Def.Task != "" || len(j.Def.Media) != 1 {
		t.Errorf("Task = %q, Media = %+v; want no text and one image", j.Def.Task, j.Def.Media)
	}
	if j.Media == nil || !cmp.Equal(j.Media.Roots, []string{abs}) {
		t.Errorf("Media = %+v, want roots [%s] (the job file's directory)", j.Media, abs)
	}
	// A text task keeps no media config.
	j, err = config.Parse([]byte("task: x\n"), "job.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	if j.Media != nil || j.Def.Media != nil {
		t.Errorf("text task: Media = %+v, Def.Media = %+v; want nil", j.Media, j.Def.Media)
	}
}

func TestParseTaskPartsErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "file.txt", "x")
	for _, tc := range []struct{ in, want string }{
		{"task: []\n", "job.yaml:1:7: task: must not be an empty list"},
		{"task: [{text: a, image: b}]\n", "task[0]: has both text and image"},
		{"task: [{video: x}]\n", `task[0].video: unknown key "video"`},
		{"task: [{detail: low}]\n", "task[0]: want one of text, image, audio or file"},
		{"task: [{audio: x, detail: low}]\n", "task[0].detail: detail is for image items only"},
		{"task: [{image: x, detail: huge}]\n", `task[0].detail: expected low, high or auto`},
		{"task: [{image: ''}]\n", "task[0].image: must not be empty"},
		{"task: [{image: '{a'}]\n", "task[0].image: invalid template"},
		{"task: [{image: [1]}]\n", "task[0].image: expected a string"},
		{"task: [x]\n", "task[0]: expected a mapping"},
		{"task: [{image: x}]\nmedia: {roots: [nope]}\n", "media.roots[0]"},
		{"task: [{image: x}]\nmedia: {roots: [file.txt]}\n", "media.roots[0]"},
		{"task: [{image: x}]\nmedia: {max_bytes: 20XB}\n", `media.max_bytes: invalid size "20XB"`},
		{"task: [{image: x}]\nmedia: {max_bytes: -1}\n", "media.max_bytes: invalid size \"-1\": must not be negative"},
		{"task: [{image: x}]\nmedia: {rootz: [a]}\n", `media.rootz: unknown key "rootz" (did you mean "roots"?)`},
	} {
		_, err := config.Parse([]byte(tc.in), "job.yaml", dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error = %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "100": 100, "100B": 100, "20MB": 20e6, "512KiB": 512 << 10, "2 GiB": 2 << 30, "1GB": 1e9, "3MiB": 3 << 20} {
		if got, err := config.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "1.5MB", "-1", "x", "9999999999999GiB"} {
		if _, err := config.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded, want an error", in)
		}
	}
}

// TestMediaByteKeys: read_file's max_media_bytes and tool_pool's
// max_media_bytes take sizes, and the file marshals back to the same job.
func TestMediaByteKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkdir(t, dir, "docs")
	j, err := config.Parse([]byte("task: x\ntools:\n  - name: read_file\n    roots: [docs]\n    max_media_bytes: 2MiB\ntool_pool: {max_media_bytes: 5MB}\n"), "job.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	rf, ok := j.Tools[0].Settings.(*filetool.ReadFileConfig)
	if !ok || rf.MaxMediaBytes != 2<<20 {
		t.Errorf("read_file settings %+v, want MaxMediaBytes %d", j.Tools[0].Settings, 2<<20)
	}
	if j.Def.ToolPool.MaxMediaBytes != 5_000_000 {
		t.Errorf("tool_pool MaxMediaBytes = %d, want 5000000", j.Def.ToolPool.MaxMediaBytes)
	}
	b, err := yaml.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse(b, "job.yaml", dir)
	if err != nil {
		t.Fatalf("parse of the marshalled job: %v\n%s", err, b)
	}
	if got := back.Tools[0].Settings.(*filetool.ReadFileConfig).MaxMediaBytes; got != 2<<20 || back.Def.ToolPool.MaxMediaBytes != 5_000_000 {
		t.Errorf("round trip: read_file %d, tool_pool %d", got, back.Def.ToolPool.MaxMediaBytes)
	}
	if _, err := config.Parse([]byte("task: x\ntool_pool: {max_media_bytes: lots}\n"), "job.yaml", dir); err == nil || !strings.Contains(err.Error(), "tool_pool.max_media_bytes") {
		t.Errorf("a bad size: %v, want an error naming tool_pool.max_media_bytes", err)
	}
}
