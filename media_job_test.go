package batchagent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// dirLoader is a library user's own job.MediaLoader: it reads PNG files
// under dir and counts its loads by reference.
type dirLoader struct {
	dir   string
	mu    sync.Mutex
	loads map[string]int
}

func (l *dirLoader) Load(_ context.Context, kind llm.PartKind, ref string) (llm.Part, error) {
	l.mu.Lock()
	l.loads[ref]++
	l.mu.Unlock()
	data, err := os.ReadFile(filepath.Join(l.dir, ref))
	if err != nil {
		return llm.Part{}, fmt.Errorf("%s: no such file under the media roots", ref)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return llm.Part{}, fmt.Errorf("%s: %v", ref, err)
	}
	return llm.Part{Kind: kind, Data: data, MediaType: "image/png", Width: cfg.Width, Height: cfg.Height, Ref: ref}, nil
}

// writePNG writes a w×h PNG to path.
func writePNG(t *testing.T, path string, w, h int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestJobMedia: a job with an image field loads each input's image once,
// when its agent starts, and bills its tokens; an input whose file is
// missing fails alone, with kind input naming the field and the path.
func TestJobMedia(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "a.png"), 600, 300)
	writePNG(t, filepath.Join(dir, "b.png"), 40, 40)
	loader := &dirLoader{dir: dir, loads: map[string]int{}}
	m := newSim(t, sim.Config{})
	d := batchagent.Def{Model: m, Task: "Describe {title}.", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{photo}", Detail: "high"}}, MediaLoader: loader}
	ins := []batchagent.Input{{"title": "red", "photo": "a.png"}, {"title": "none", "photo": "missing.png"}, {"title": "small", "photo": "b.png"}}
	_, rs := runWith(t, batchagent.Config{}, d, input.Slice(ins))
	_, text := runWith(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "Describe {title}."}, input.Slice(ins))

	for i, ref := range []string{"a.png", "missing.png", "b.png"} {
		if n := loader.loads[ref]; n != 1 {
			t.Errorf("%s loaded %d times, want once", ref, n)
		}
		if i == 1 {
			continue
		}
		r := rs[i]
		if r.Err != nil {
			t.Fatalf("input %d: %v", i, r.Err)
		}
		part, _ := loader.Load(t.Context(), llm.PartImage, ref)
		part.Detail = "high"
		want := text[i].Usage.PromptTokens + int64(media.Tokens(&part, media.DefaultBilling))
		if got := r.Usage.PromptTokens; got != want || got <= text[i].Usage.PromptTokens {
			t.Errorf("input %d: %d prompt tokens, want %d (the text's %d and the image's)", i, got, want, text[i].Usage.PromptTokens)
		}
	}
	r := rs[1]
	ae, ok := errors.AsType[*job.AgentError](r.Err)
	if !ok || ae.Kind != job.KindInput || ae.Op != "input" {
		t.Fatalf("missing file: error %v (%T), want an AgentError of kind input, op input", r.Err, r.Err)
	}
	if want := `field "photo": missing.png: no such file under the media roots`; !strings.Contains(r.Err.Error(), want) {
		t.Errorf("missing file: error %q, want it to contain %q", r.Err, want)
	}
	if me, ok := errors.AsType[*job.MediaError](r.Err); !ok || me.Ref != "missing.png" {
		t.Errorf("missing file: error %v, want a MediaError with ref missing.png", r.Err)
	}
}

// TestJobMediaCanceled: a load that ends with the run's context is a
// canceled input, not a bad one.
func TestJobMediaCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	l := loaderFunc(func(ctx context.Context, _ llm.PartKind, ref string) (llm.Part, error) {
		cancel()
		<-ctx.Done()
		return llm.Part{}, fmt.Errorf("%s: %w", ref, ctx.Err())
	})
	spec := mustSpec(t, batchagent.Def{Model: newSim(t, sim.Config{}), Task: "x", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{p}"}}, MediaLoader: l})
	e := newEngine(t, batchagent.Config{})
	rs, _ := e.Run(ctx, spec, input.Slice([]batchagent.Input{{"p": "a.png"}}))
	if len(rs) != 1 || job.KindOf(rs[0].Err) != job.KindCanceled {
		t.Fatalf("results %+v, want one canceled", rs)
	}
}

// TestJobMediaRefusedAtOpen: a job whose backend cannot take its media's
// kind is refused by NewSpec, naming the task part and the capability.
func TestJobMediaRefusedAtOpen(t *testing.T) {
	l := loaderFunc(func(context.Context, llm.PartKind, string) (llm.Part, error) { return llm.Part{}, nil })
	for _, tc := range []struct {
		d    batchagent.Def
		want string
	}{
		{batchagent.Def{Model: &labeler{}, Task: "x", Media: []job.MediaField{{Kind: llm.PartAudio, Ref: "{clip}"}}, MediaLoader: l},
			"task part 2 (audio {clip}): the backend takes no audio parts as bytes"},
		{batchagent.Def{Model: &labeler{}, Task: "x", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{p}"}}},
			"media fields without a media loader"},
		{batchagent.Def{Model: &labeler{}, Task: "x", Media: []job.MediaField{{Kind: "video", Ref: "{p}"}}, MediaLoader: l},
			`unknown media kind "video"`},
		{batchagent.Def{Model: &labeler{}, Task: "x", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{p", Detail: "low"}}, MediaLoader: l},
			"task part 2 (image {p)"},
		{batchagent.Def{Model: &labeler{}, Task: "x", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{p}", Detail: "max"}}, MediaLoader: l},
			`detail "max": want low, high or auto`},
		{batchagent.Def{Model: &labeler{}, Task: "x", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{p}"}}, MediaLoader: l,
			Fallbacks: []batchagent.Fallback{{Model: stubModel{}}}},
			"fallback 1: the backend takes no image parts as bytes"},
	} {
		_, err := batchagent.NewSpec(tc.d)
		if !errors.Is(err, batchagent.ErrBadJob) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSpec(%+v) = %v, want ErrBadJob containing %q", tc.d.Media, err, tc.want)
		}
	}
}

// loaderFunc is a job.MediaLoader of a function.
type loaderFunc func(ctx context.Context, kind llm.PartKind, ref string) (llm.Part, error)

func (f loaderFunc) Load(ctx context.Context, kind llm.PartKind, ref string) (llm.Part, error) {
	return f(ctx, kind, ref)
}

// stubModel is a model that declares no capabilities.
type stubModel struct{}

func (stubModel) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, errors.New("stub")
}

// passLoader passes every reference on as a URL the provider fetches, as
// the CLI's loader does with media.pass_urls.
type passLoader struct{}

func (passLoader) Load(_ context.Context, kind llm.PartKind, ref string) (llm.Part, error) {
	return llm.Part{Kind: kind, URL: ref, Ref: ref}, nil
}

// TestJobMediaURLRefused: a job whose image field opens on a backend that
// takes images as bytes only (Ollama's endpoint fetches no URL) fails each
// input whose image comes as a URL with kind input, naming the field, the
// URL and why, and sends nothing: not one failed call per input.
func TestJobMediaURLRefused(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "llava", Flavor: openai.FlavorOllama})
	if err != nil {
		t.Fatal(err)
	}
	d := batchagent.Def{Model: m, Task: "Describe it.", Media: []job.MediaField{{Kind: llm.PartImage, Ref: "{photo}"}}, MediaLoader: passLoader{}}
	_, rs := runWith(t, batchagent.Config{}, d, input.Slice([]batchagent.Input{{"photo": "https://cdn.example.com/a.png"}}))
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	want := `field "photo": https://cdn.example.com/a.png: the backend takes no image parts by URL`
	if ae, ok := errors.AsType[*job.AgentError](rs[0].Err); !ok || ae.Kind != job.KindInput || !strings.Contains(ae.Error(), want) {
		t.Errorf("error %v, want kind input containing %q", rs[0].Err, want)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls reached the backend, want none", n)
	}
}
