package job_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/job"
)

func mustParse(t testing.TB, text string) *job.Template {
	t.Helper()
	tmpl, err := job.ParseTemplate(text)
	if err != nil {
		t.Fatalf("ParseTemplate(%q) error: %v", text, err)
	}
	return tmpl
}

func TestParseTemplateOK(t *testing.T) {
	t.Parallel()
	in := job.Input{
		"name": "Ada", "n": json.Number("3"), "user": map[string]any{"name": "Bob", "first-name": "B"},
		"_x": "u", "a-b": "dash", "A9": "digits",
	}
	tests := []struct {
		name   string
		text   string
		fields []string
		want   string
	}{
		{"empty", "", nil, ""},
		{"literal only", "hello world", nil, "hello world"},
		{"one field", "{name}", []string{"name"}, "Ada"},
		{"field in text", "Hi {name}!", []string{"name"}, "Hi Ada!"},
		{"two fields", "{name} has {n}", []string{"name", "n"}, "Ada has 3"},
		{"adjacent fields", "{name}{n}{name}", []string{"name", "n"}, "Ada3Ada"},
		{"nested", "{user.name}", []string{"user"}, "Bob"},
		{"nested dash", "{user.first-name}", []string{"user"}, "B"},
		{"fields distinct top level", "{user.name} {n} {user.first-name}", []string{"user", "n"}, "Bob 3 B"},
		{"underscore start", "{_x}", []string{"_x"}, "u"},
		{"dash in name", "{a-b}", []string{"a-b"}, "dash"},
		{"digits in name", "{A9}", []string{"A9"}, "digits"},
		{"escaped open", "{{", nil, "{"},
		{"escaped close", "}}", nil, "}"},
		{"escaped pair", "{{name}}", nil, "{name}"},
		{"escape around field", "{{{name}}}", []string{"name"}, "{Ada}"},
		{"json example", `{{"a": {{"b": 1}}}}`, nil, `{"a": {"b": 1}}`},
		{"multiline", "line1\n{name}\nline3", []string{"name"}, "line1\nAda\nline3"},
		{"unicode", "héllo {name} ✓", []string{"name"}, "héllo Ada ✓"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := mustParse(t, tt.text)
			if diff := cmp.Diff(tt.fields, tmpl.Fields()); diff != "" {
				t.Errorf("ParseTemplate(%q).Fields() mismatch (-want +got):\n%s", tt.text, diff)
			}
			got, err := tmpl.Render(in)
			if err != nil || got != tt.want {
				t.Errorf("Render(%q) = %q, %v, want %q, nil", tt.text, got, err, tt.want)
			}
		})
	}
}

func TestParseTemplateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want job.TemplateSyntaxError // Msg is checked for a substring
	}{
		{"unclosed at end", "Hello {", job.TemplateSyntaxError{Offset: 6, Line: 1, Col: 7, Msg: `unclosed "{"`}},
		{"unclosed with name", "Hello {name", job.TemplateSyntaxError{Offset: 6, Line: 1, Col: 7, Msg: `unclosed "{"`}},
		{"unclosed before newline", "a\nb {name\nc}", job.TemplateSyntaxError{Offset: 4, Line: 2, Col: 3, Msg: `unclosed "{"`}},
		{"unclosed before open", "{a {b}", job.TemplateSyntaxError{Offset: 0, Line: 1, Col: 1, Msg: `unclosed "{"`}},
		{"lone close", "a } b", job.TemplateSyntaxError{Offset: 2, Line: 1, Col: 3, Msg: `unexpected "}"`}},
		{"lone close after field", "{a}}", job.TemplateSyntaxError{Offset: 3, Line: 1, Col: 4, Msg: `unexpected "}"`}},
		{"lone close line 3", "x\ny\n  }", job.TemplateSyntaxError{Offset: 6, Line: 3, Col: 3, Msg: `unexpected "}"`}},
		{"odd closes", "{{{a}}}}", job.TemplateSyntaxError{Offset: 7, Line: 1, Col: 8, Msg: `unexpected "}"`}},
		{"empty", "x {}", job.TemplateSyntaxError{Offset: 2, Line: 1, Col: 3, Msg: `empty placeholder`}},
		{"space inside", "{ name }", job.TemplateSyntaxError{Offset: 1, Line: 1, Col: 2, Msg: `unexpected ' '`}},
		{"space in name", "{a b}", job.TemplateSyntaxError{Offset: 2, Line: 1, Col: 3, Msg: `unexpected ' '`}},
		{"json object", `{"a": 1}`, job.TemplateSyntaxError{Offset: 1, Line: 1, Col: 2, Msg: `unexpected '"'`}},
		{"digit start", "{1a}", job.TemplateSyntaxError{Offset: 1, Line: 1, Col: 2, Msg: "must start with a letter or underscore"}},
		{"dash start", "{-a}", job.TemplateSyntaxError{Offset: 1, Line: 1, Col: 2, Msg: "must start with a letter or underscore"}},
		{"dot start", "{.a}", job.TemplateSyntaxError{Offset: 1, Line: 1, Col: 2, Msg: "must start with a letter or underscore"}},
		{"trailing dot", "{a.}", job.TemplateSyntaxError{Offset: 3, Line: 1, Col: 4, Msg: "empty name segment"}},
		{"double dot", "{a..b}", job.TemplateSyntaxError{Offset: 3, Line: 1, Col: 4, Msg: "empty name segment"}},
		{"non-ascii name", "{é}", job.TemplateSyntaxError{Offset: 1, Line: 1, Col: 2, Msg: `unexpected 'é'`}},
		{"col counts runes", "héllo\nçà }", job.TemplateSyntaxError{Offset: 12, Line: 2, Col: 4, Msg: `unexpected "}"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl, err := job.ParseTemplate(tt.text)
			var se *job.TemplateSyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("ParseTemplate(%q) = %v, %v, want *TemplateSyntaxError", tt.text, tmpl, err)
			}
			if tmpl != nil {
				t.Errorf("ParseTemplate(%q) template = %v, want nil", tt.text, tmpl)
			}
			if se.Offset != tt.want.Offset || se.Line != tt.want.Line || se.Col != tt.want.Col {
				t.Errorf("ParseTemplate(%q) error at offset %d line %d col %d, want offset %d line %d col %d (%v)",
					tt.text, se.Offset, se.Line, se.Col, tt.want.Offset, tt.want.Line, tt.want.Col, err)
			}
			if !strings.Contains(se.Msg, tt.want.Msg) {
				t.Errorf("ParseTemplate(%q) error Msg = %q, want it to contain %q", tt.text, se.Msg, tt.want.Msg)
			}
		})
	}
}

func TestTemplateSyntaxErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := job.ParseTemplate("ab\ncd {x")
	const want = `template: line 2, col 4: unclosed "{" (write "{{" for a literal brace)`
	if err == nil || err.Error() != want {
		t.Errorf("ParseTemplate error = %v, want %s", err, want)
	}
}

type label string

type celsius float64

func TestRender(t *testing.T) {
	t.Parallel()
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	tests := []struct {
		name string
		text string
		in   job.Input
		want string
	}{
		{"string", "[{v}]", job.Input{"v": "a <b> & c"}, "[a <b> & c]"},
		{"empty string", "[{v}]", job.Input{"v": ""}, "[]"},
		{"only a string field", "{v}", job.Input{"v": "x"}, "x"},
		{"json number int", "{v}", job.Input{"v": json.Number("42")}, "42"},
		{"json number float", "{v}", job.Input{"v": json.Number("-1.50e3")}, "-1.50e3"},
		{"int", "{v}", job.Input{"v": -7}, "-7"},
		{"int64", "{v}", job.Input{"v": int64(math.MaxInt64)}, "9223372036854775807"},
		{"uint8", "{v}", job.Input{"v": uint8(255)}, "255"},
		{"uint64", "{v}", job.Input{"v": uint64(math.MaxUint64)}, "18446744073709551615"},
		{"float64", "{v}", job.Input{"v": 3.25}, "3.25"},
		{"float64 integral", "{v}", job.Input{"v": 100.0}, "100"},
		{"float64 large", "{v}", job.Input{"v": 1e21}, "1e+21"},
		{"float64 small", "{v}", job.Input{"v": 1e-7}, "1e-7"},
		{"float32", "{v}", job.Input{"v": float32(0.1)}, "0.1"},
		{"true", "{v}", job.Input{"v": true}, "true"},
		{"false", "{v}", job.Input{"v": false}, "false"},
		{"nil", "{v}", job.Input{"v": nil}, "null"},
		{"object", "{v}", job.Input{"v": map[string]any{"b": json.Number("1"), "a": "<x>"}}, `{"a":"<x>","b":1}`},
		{"array", "{v}", job.Input{"v": []any{"x", json.Number("2"), nil, true}}, `["x",2,null,true]`},
		{"empty object", "{v}", job.Input{"v": map[string]any{}}, `{}`},
		{"nested", "{u.name} is {u.age}", job.Input{"u": map[string]any{"name": "Bo", "age": json.Number("9")}}, "Bo is 9"},
		{"nested input", "{u.name}", job.Input{"u": job.Input{"name": "In"}}, "In"},
		{"deep", "{a.b.c}", job.Input{"a": map[string]any{"b": map[string]any{"c": "deep"}}}, "deep"},
		{"nested object as json", "{a.b}", job.Input{"a": map[string]any{"b": map[string]any{"c": "d"}}}, `{"c":"d"}`},
		{"array index", "{tags.1}", job.Input{"tags": []any{"x", "y"}}, "y"},
		{"array index then key", "{rows.0.id}", job.Input{"rows": []any{map[string]any{"id": json.Number("5")}}}, "5"},
		{"digit key in object", "{m.0}", job.Input{"m": map[string]any{"0": "zero"}}, "zero"},
		{"named string", "{v}", job.Input{"v": label("lbl")}, "lbl"},
		{"named float", "{v}", job.Input{"v": celsius(21.5)}, "21.5"},
		{"time", "{v}", job.Input{"v": when}, "2024-05-06T07:08:09Z"},
		{"struct as json", "{v}", job.Input{"v": struct{ A int }{1}}, `{"A":1}`},
		{"escapes", "{{{v}}} }}", job.Input{"v": "x"}, "{x} }"},
		{"extra fields ignored", "{a}", job.Input{"a": "1", "b": "2"}, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := mustParse(t, tt.text)
			got, err := tmpl.Render(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("Render(%q, %v) = %q, %v, want %q, nil", tt.text, tt.in, got, err, tt.want)
			}
			b, err := tmpl.AppendRender([]byte("pre:"), tt.in)
			if want := "pre:" + tt.want; err != nil || string(b) != want {
				t.Errorf("AppendRender(%q, %v) = %q, %v, want %q, nil", tt.text, tt.in, b, err, want)
			}
		})
	}
}

func TestRenderMissingField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		text  string
		in    job.Input
		field string
	}{
		{"absent", "Hi {name}", job.Input{"other": "x"}, "name"},
		{"nil input", "Hi {name}", nil, "name"},
		{"absent nested", "{user.name}", job.Input{"user": map[string]any{"id": "1"}}, "user.name"},
		{"absent parent", "{user.name}", job.Input{}, "user.name"},
		{"parent not object", "{user.name}", job.Input{"user": "bob"}, "user.name"},
		{"parent null", "{user.name}", job.Input{"user": nil}, "user.name"},
		{"index out of range", "{tags.2}", job.Input{"tags": []any{"a"}}, "tags.2"},
		{"non-index into array", "{tags.x}", job.Input{"tags": []any{"a"}}, "tags.x"},
		{"second field absent", "{a} {b}", job.Input{"a": "1"}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := mustParse(t, tt.text)
			got, err := tmpl.Render(tt.in)
			var mf *job.MissingFieldError
			if !errors.As(err, &mf) || mf.Field != tt.field {
				t.Fatalf("Render(%q, %v) = %q, %v, want *MissingFieldError{Field: %q}", tt.text, tt.in, got, err, tt.field)
			}
			if got != "" {
				t.Errorf("Render(%q, %v) text = %q, want empty on error", tt.text, tt.in, got)
			}
			dst := []byte("keep")
			b, err := tmpl.AppendRender(dst, tt.in)
			if err == nil || string(b) != "keep" {
				t.Errorf("AppendRender(%q, %v) = %q, %v, want %q and an error", tt.text, tt.in, b, err, "keep")
			}
		})
	}
}

func TestMissingFieldErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := mustParse(t, "{user.name}").Render(job.Input{})
	const want = `template: input has no field "user.name"`
	if err == nil || err.Error() != want {
		t.Errorf("Render error = %v, want %s", err, want)
	}
}

func TestRenderUnencodable(t *testing.T) {
	t.Parallel()
	_, err := mustParse(t, "{v}").Render(job.Input{"v": map[string]any{"c": make(chan int)}})
	var ute *json.UnsupportedTypeError
	if !errors.As(err, &ute) || !strings.Contains(err.Error(), `field "v"`) {
		t.Errorf("Render(chan) = %v, want a *json.UnsupportedTypeError naming field \"v\"", err)
	}
}

func TestFieldsCopy(t *testing.T) {
	t.Parallel()
	tmpl := mustParse(t, "{a}{b}")
	tmpl.Fields()[0] = "changed"
	if got := tmpl.Fields(); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("Fields() after modifying a returned slice = %v, want [a b]", got)
	}
}

func TestZeroTemplate(t *testing.T) {
	t.Parallel()
	var tmpl job.Template
	got, err := tmpl.Render(job.Input{"a": "1"})
	if got != "" || err != nil || len(tmpl.Fields()) != 0 {
		t.Errorf("zero Template: Render = %q, %v, Fields = %v, want \"\", nil, []", got, err, tmpl.Fields())
	}
}

func TestRenderConcurrent(t *testing.T) {
	t.Parallel()
	tmpl := mustParse(t, "id={id} name={name} tags={tags}")
	done := make(chan string, 8) // one per goroutine
	for i := range 8 {
		go func() {
			in := job.Input{"id": i, "name": "n", "tags": []any{"a"}}
			var last string
			for range 200 {
				s, err := tmpl.Render(in)
				if err != nil {
					s = err.Error()
				}
				last = s
			}
			done <- last
		}()
	}
	got := map[string]bool{}
	for range 8 {
		got[<-done] = true
	}
	for i := range 8 {
		want := "id=" + string(rune('0'+i)) + ` name=n tags=["a"]`
		if !got[want] {
			t.Errorf("concurrent Render results %v lack %q", got, want)
		}
	}
}
