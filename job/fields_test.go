package job_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTemplateMissingFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		have []string
		want []string
	}{
		{"all present", "{id}: {name}", []string{"name", "id", "extra"}, nil},
		{"no placeholders", "plain {{text}}", nil, nil},
		{"one missing", "{id}: {name}", []string{"id"}, []string{"name"}},
		{"order of first use, once each", "{b} {a} {b} {c}", []string{"c"}, []string{"b", "a"}},
		{"nested placeholder: only the top-level key counts", "{user.name} {user.age} {tags.0}", []string{"tags"}, []string{"user.name"}},
		{"nested present", "{user.name.first}", []string{"user"}, nil},
		{"empty header", "{x}", []string{}, []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := mustParse(t, tt.text)
			if diff := cmp.Diff(tt.want, tmpl.MissingFields(tt.have)); diff != "" {
				t.Errorf("ParseTemplate(%q).MissingFields(%q) mismatch (-want +got):\n%s", tt.text, tt.have, diff)
			}
		})
	}
}
