package job_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/job"
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

func TestCSVHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		want    []string
		wantErr string
	}{
		{"plain", "id,name\n1,a\n", []string{"id", "name"}, ""},
		{"BOM, blank line, quotes", "\xEF\xBB\xBF\n\"id\",\"a, b\"\n", []string{"id", "a, b"}, ""},
		{"header only, no newline", "x", []string{"x"}, ""},
		{"empty", "", nil, "in.csv:1: empty input: no CSV header"},
		{"duplicate", "a,a\n", nil, `in.csv:1: header: duplicate name "a" in columns 1 and 2`},
		{"invalid UTF-8", "a,\xff\n", nil, "in.csv:1: header: invalid UTF-8 in column 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := job.CSVHeader(strings.NewReader(tt.input), "in.csv")
			if tt.wantErr != "" {
				if _, ok := errors.AsType[*job.InputError](err); !ok || err.Error() != tt.wantErr {
					t.Fatalf("CSVHeader(%q) = %q, %v; want *InputError %q", tt.input, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CSVHeader(%q) error %v", tt.input, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CSVHeader(%q) mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}
