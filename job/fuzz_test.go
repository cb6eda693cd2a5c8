package job_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/job"
)

func FuzzTemplateRender(f *testing.F) {
	for _, s := range []string{
		"",
		"plain",
		"Hello {name}!",
		"{user.name} is {user.age}",
		"{{literal}} {name}",
		"{{{name}}}",
		"{",
		"}",
		"{}",
		"{a..b}",
		"{1x}",
		"{tags.0}{tags.5}",
		"héllo\n{missing}",
		"{name.x.y}",
	} {
		f.Add(s)
	}
	in := job.Input{
		"name": "Ada",
		"n":    3,
		"user": map[string]any{"name": "Bob", "age": 9.5},
		"tags": []any{"a", nil},
		"ok":   true,
	}
	f.Fuzz(func(t *testing.T, text string) {
		tmpl, err := job.ParseTemplate(text)
		if err != nil {
			var se *job.TemplateSyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset >= len(text) || se.Line < 1 || se.Col < 1 {
				t.Fatalf("ParseTemplate(%q) error %#v, want a *TemplateSyntaxError within the text", text, err)
			}
			return
		}
		out, err := tmpl.Render(in)
		if err != nil {
			var mf *job.MissingFieldError
			if !errors.As(err, &mf) {
				t.Fatalf("Render(%q) error %v, want only *MissingFieldError", text, err)
			}
			top, _, _ := strings.Cut(mf.Field, ".")
			if _, ok := in[top]; ok && mf.Field == top {
				t.Fatalf("Render(%q) says field %q is missing, but the input has it", text, mf.Field)
			}
			return
		}
		if !strings.ContainsAny(text, "{}") && out != text {
			t.Fatalf("Render(%q) = %q, want the text unchanged", text, out)
		}
		for _, name := range tmpl.Fields() {
			if _, ok := in[name]; !ok {
				t.Fatalf("Render(%q) succeeded though input lacks field %q", text, name)
			}
		}
	})
}
