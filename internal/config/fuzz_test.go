package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool/filetool"
)

// FuzzJobSpecDecode checks that Parse never panics and that it returns
// either a *config.Error with at least one problem, or a job with a task.
func FuzzJobSpecDecode(f *testing.F) {
	dir := f.TempDir()
	if err := mkdirAll(filepath.Join(dir, "docs")); err != nil {
		f.Fatal(err)
	}
	for name, content := range map[string]string{
		"schema.json": `{"type": "object", "required": ["a"]}`,
		"schema.yaml": "type: object\nproperties: {a: {type: integer}}\n",
		"bad.json":    `{"type": }`,
	} {
		if err := writeBytes(filepath.Join(dir, name), content); err != nil {
			f.Fatal(err)
		}
	}
	for _, seed := range []string{
		fullJob,
		"task: Summarise {doc}\n",
		"task: x\noutput_schema: schema.json\n",
		"task: x\noutput_schema: schema.yaml\n",
		"task: x\noutput_schema: bad.json\n",
		"task: x\ntools:\n  - name: read_file\n    roots: [docs]\n    max_bytes: 100\n    cacheable: true\n",
		"task: x\ntools: [&a {<<: *a}]\n",
		"task: &t x\nsystem: *t\nlimits: &l {max_turns: 2}\n",
		"name: demo\ntask: [a, b]\ntaks: x\nlimits:\n  max_turns: abc\n  max_inflight: -1\n  max_turnz: 3\n  timeout: 30\ntools:\n  - name: web_search\n",
		"task: '{a'\n",
		"task: x\noutput_schema: {a: .nan, 1: b, c: [1, 2.5, ~, true]}\n",
		"task: x\n---\ntask: y\n",
		knobsJob,
		tiersJob,
		"task: x\npack: {max_agents: 1, max_prompt_tokens: 0}\ntools: [{name: http_get}]\nlimits: {budget: 0s}\nfallbacks: [{model: m}, {backend: x}, 1]\n",
		"task: x\nmax_tokens: -1\ntemperature: .inf\ntop_p: 2\nseed: 1e3\nstop: [a, '', {b: c}]\n",
		"task: x\nlimits: {backoff: {base: 1h, max: 1s, rate_limit_base: x}, probe_interval: -1s}\ntool_pool: {cache_size: -9, cache_ttl: 3, max_result_bytes: x}\n",
		"{task: x model: y}\n",
		"task: x\nlimits:\n\tmax_turns: 1\n",
		"- a\n",
		"",
		"task:\n  - text: a {t}\n  - image: \"{photo}\"\n    detail: low\n  - audio: \"{clip}\"\n  - file: x.pdf\nmedia: {roots: [docs], max_bytes: 20MB, fetch: [\"*.example.com\"], pass_urls: true}\n",
		"task: [{text: a, image: b}, {detail: high}, {video: x}, [1], {file: ''}, {audio: x, detail: low}]\nmedia: {roots: [nope, ''], max_bytes: -1GB}\n",
		"task: []\nmedia: {max_bytes: [1]}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := config.Parse(data, "job.yaml", dir)
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse(%q) error = %v (%T), want a *config.Error", data, err, err)
			}
			if j != nil {
				t.Errorf("Parse(%q) = %+v and an error, want a nil job", data, j)
			}
			if len(ce.Problems) == 0 {
				t.Fatalf("Parse(%q) error has no problems", data)
			}
			sorted := slices.IsSortedFunc(ce.Problems, func(a, b config.Problem) int {
				if a.Line != b.Line {
					return a.Line - b.Line
				}
				return a.Col - b.Col
			})
			if !sorted {
				t.Errorf("Parse(%q) problems not sorted: %+v", data, ce.Problems)
			}
			for _, p := range ce.Problems {
				if p.Msg == "" || p.Line < 0 || p.Col < 0 {
					t.Errorf("Parse(%q) problem %+v, want a message and a position", data, p)
				}
			}
			if !strings.HasPrefix(err.Error(), "job.yaml") {
				t.Errorf("Parse(%q) error = %q, want it to start with the file name", data, err)
			}
			return
		}
		if j == nil || strings.TrimSpace(j.Def.Task) == "" && len(j.Def.Media) == 0 {
			t.Fatalf("Parse(%q) = %+v, nil, want a job with a task", data, j)
		}
		if j.Backend == "" || j.Dir != dir || j.Path != "job.yaml" {
			t.Errorf("Parse(%q) = Backend %q, Dir %q, Path %q, want a backend, %q, %q", data, j.Backend, j.Dir, j.Path, dir, "job.yaml")
		}
		d := j.Def
		if p := d.Temperature; d.MaxTokens < 0 || p != nil && !(*p >= 0 && *p <= math.MaxFloat64) || d.TopP != nil && !(*d.TopP >= 0 && *d.TopP <= 1) {
			t.Errorf("Parse(%q) accepted max_tokens %d, temperature %v, top_p %v", data, d.MaxTokens, d.Temperature, d.TopP)
		}
		if b := d.Backoff; b.Base < 0 || b.RateLimitBase < 0 || b.Max < 0 || d.ToolPool.CacheSize < -1 || d.ToolPool.MaxResultBytes < -1 || d.ToolPool.CacheTTL < 0 {
			t.Errorf("Parse(%q) accepted back-off %+v, tool pool %+v", data, b, d.ToolPool)
		}
		if slices.Contains(d.Stop, "") {
			t.Errorf("Parse(%q) accepted an empty stop sequence", data)
		}
		if s := d.OutputSchema; s != nil && (!json.Valid(s) || s[0] != '{') {
			t.Errorf("Parse(%q).Def.OutputSchema = %s, want a JSON object", data, s)
		}
		// What the file holds is what the engine takes: a job file that
		// parses gives a valid Def and Config.
		d.Model = nopModel{}
		if len(d.Media) > 0 {
			// The caller opens a backend that takes them and a loader.
			d.Model, d.MediaLoader = mediaModel{}, nopLoader{}
			if j.Media == nil {
				t.Errorf("Parse(%q) gave media items and no media config", data)
			}
		}
		for _, f := range j.Fallbacks {
			if f.Backend == "" {
				t.Errorf("Parse(%q) accepted a fallback without a backend", data)
			}
			d.Fallbacks = append(d.Fallbacks, batchagent.Fallback{Model: d.Model, ModelName: f.Model})
		}
		if d.Budget != 0 && len(d.Fallbacks) == 0 {
			t.Errorf("Parse(%q) accepted budget %v without fallbacks", data, d.Budget)
		}
		if _, err := batchagent.NewSpec(d); err != nil {
			t.Errorf("Parse(%q) accepted a Def that NewSpec refuses: %v", data, err)
		}
		if _, err := batchagent.New(j.Engine); err != nil {
			t.Errorf("Parse(%q) accepted a Config that New refuses: %v", data, err)
		}
		for _, tl := range j.Tools {
			var roots []string
			switch s := tl.Settings.(type) {
			case *filetool.ReadFileConfig:
				roots = s.Roots
			case *filetool.ListDirConfig:
				roots = s.Roots
			}
			for _, r := range roots {
				if !filepath.IsAbs(r) {
					t.Errorf("Parse(%q) tool root %q, want an absolute path", data, r)
				}
			}
		}
	})
}

// mediaModel is a model that takes every kind of media.
type mediaModel struct{ nopModel }

func (mediaModel) Capabilities() llm.Capabilities {
	return llm.Capabilities{Media: llm.Media{Image: true, ImageURL: true, Audio: true, File: true, FileURL: true}}
}

// nopLoader is a media loader that loads nothing.
type nopLoader struct{}

func (nopLoader) Load(context.Context, llm.PartKind, string) (llm.Part, error) {
	return llm.Part{}, errors.New("nop loader")
}
