package job

import (
	"context"
	"fmt"
	"strconv"

	"github.com/batchagent/batchagent/llm"
)

// A MediaField places one media item of each input in the agent's first
// message, after the task's text.
type MediaField struct {
	Kind   llm.PartKind // llm.PartImage, llm.PartAudio or llm.PartFile
	Ref    string       // template with {field} placeholders rendering to a path under the media roots, an https URL or a data: URL
	Detail string       // images: "low", "high", "auto"; "" the provider's default
}

// A MediaLoader reads the media a rendered MediaField.Ref names. Load is
// called when the agent's first request is built (lazily, one input at a
// time), from many goroutines at once.
type MediaLoader interface {
	Load(ctx context.Context, kind llm.PartKind, ref string) (llm.Part, error)
}

// A MediaError is the failure to load an input's media item: the input
// fails alone, with kind [KindInput].
type MediaError struct {
	Field string // what the item's reference is rendered from: its placeholder's field, or the template when it has none or several
	Ref   string // the rendered reference
	Err   error  // the loader's error, which names the reference and the reason
}

// Error returns e.g. `field "photo": photos/missing.png: no such file
// under the media roots`.
func (e *MediaError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *MediaError) Unwrap() error { return e.Err }

// A media is a compiled [MediaField]: its reference's template parsed.
type media struct {
	field MediaField
	tmpl  *Template
	name  string // names the field in errors: `field "photo"`
}

// compileMedia checks d's media fields against the model's capabilities
// and parses their references.
func compileMedia(d Def) (*MediaSet, error) {
	if len(d.Media) == 0 {
		return nil, nil
	}
	if d.MediaLoader == nil {
		return nil, badSpec("media fields without a media loader")
	}
	out := make([]media, len(d.Media))
	for i, f := range d.Media {
		where := fmt.Sprintf("task part %d (%s %s)", i+2, f.Kind, f.Ref)
		switch f.Kind {
		case llm.PartImage, llm.PartAudio, llm.PartFile:
		default:
			return nil, badSpec("%s: unknown media kind %q: want image, audio or file", where, f.Kind)
		}
		switch f.Detail {
		case "", "low", "high", "auto":
		default:
			return nil, badSpec("%s: detail %q: want low, high or auto", where, f.Detail)
		}
		if f.Detail != "" && f.Kind != llm.PartImage {
			return nil, badSpec("%s: detail is for images only", where)
		}
		if f.Ref == "" {
			return nil, badSpec("%s: empty media reference", where)
		}
		t, err := ParseTemplate(f.Ref)
		if err != nil {
			return nil, badSpec("%s: %v", where, err)
		}
		if err := accepts(d.Model, f.Kind); err != nil {
			return nil, badSpec("%s: %v", where, err)
		}
		for n, fb := range d.Fallbacks {
			if fb.Model == nil {
				continue
			}
			if err := accepts(fb.Model, f.Kind); err != nil {
				return nil, badSpec("%s: fallback %d: %v", where, n+1, err)
			}
		}
		name := "media " + strconv.Quote(f.Ref)
		if fs := t.Fields(); len(fs) == 1 {
			name = "field " + strconv.Quote(fs[0])
		}
		out[i] = media{field: f, tmpl: t, name: name}
	}
	set := &MediaSet{items: out, loader: d.MediaLoader, caps: []llm.Media{capsOf(d.Model)}}
	for _, fb := range d.Fallbacks {
		if fb.Model != nil {
			set.caps = append(set.caps, capsOf(fb.Model))
		}
	}
	return set, nil
}

// capsOf returns the media m takes; none when it declares no capabilities.
func capsOf(m llm.Model) llm.Media {
	if c, ok := m.(llm.Capable); ok {
		return c.Capabilities().Media
	}
	return llm.Media{}
}

// accepts reports whether m takes parts of kind as bytes. A model that
// declares no capabilities takes no media.
func accepts(m llm.Model, kind llm.PartKind) error {
	return capsOf(m).Accepts(llm.Part{Kind: kind})
}

// A MediaSet is a job's compiled media fields with its loader: what an
// agent's first message carries after the task's text. It holds nothing
// of the [Spec] it came from, and is safe for concurrent use.
type MediaSet struct {
	items  []media
	loader MediaLoader
	// caps are the media the job's model and each fallback's take: a
	// loaded part must suit them all (a URL where bytes were checked).
	caps []llm.Media
}

// Media returns the job's media fields, compiled; nil for a text-only
// task.
func (s *Spec) Media() *MediaSet { return s.media }

// Load renders the media references for in and loads each through the
// job's MediaLoader, in order, with its Detail set. A reference that does
// not render returns the template's error; a load that fails returns a
// *[MediaError]. A nil set loads nothing.
func (m *MediaSet) Load(ctx context.Context, in Input) ([]llm.Part, error) {
	if m == nil {
		return nil, nil
	}
	parts := make([]llm.Part, 0, len(m.items))
	for _, it := range m.items {
		ref, err := it.tmpl.Render(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", it.name, err)
		}
		p, err := m.loader.Load(ctx, it.field.Kind, ref)
		if err != nil {
			return nil, &MediaError{Field: it.name, Ref: ref, Err: err}
		}
		if p.Kind != it.field.Kind {
			return nil, &MediaError{Field: it.name, Ref: ref, Err: fmt.Errorf("%s: the loader returned a %s part for a %s field", ref, p.Kind, it.field.Kind)}
		}
		for _, c := range m.caps {
			// The kind was checked as bytes when the job opened; a part
			// given by URL (pass_urls) or file id may still not suit.
			if err := c.Accepts(p); err != nil {
				return nil, &MediaError{Field: it.name, Ref: ref, Err: fmt.Errorf("%s: %w", ref, err)}
			}
		}
		p.Detail = it.field.Detail
		parts = append(parts, p)
	}
	return parts, nil
}

// Templates returns the reference templates, in order: their
// placeholders are fields the inputs must have, as the task's are. A nil
// set has none.
func (m *MediaSet) Templates() []*Template {
	if m == nil {
		return nil
	}
	ts := make([]*Template, len(m.items))
	for i, it := range m.items {
		ts[i] = it.tmpl
	}
	return ts
}
