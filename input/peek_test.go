package input_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/input"
)

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
			got, err := input.CSVHeader(strings.NewReader(tt.input), "in.csv")
			if tt.wantErr != "" {
				if _, ok := errors.AsType[*input.Error](err); !ok || err.Error() != tt.wantErr {
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

// failOnce is an io.Reader that returns data, then err once, then io.EOF:
// a read error that a reader does not repeat.
type failOnce struct {
	data string
	err  error
}

func (r *failOnce) Read(p []byte) (int, error) {
	if r.data != "" {
		n := copy(p, r.data)
		r.data = r.data[n:]
		return n, nil
	}
	if err := r.err; err != nil {
		r.err = nil
		return 0, err
	}
	return 0, io.EOF
}

// TestCSVReadErrorAtStart reports a read error of the input at its start, which
// bufio's Peek clears, as a read error: not as an empty input, nor as a
// header of the bytes read before it.
func TestCSVReadErrorAtStart(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("disk gone")
	for _, data := range []string{"", "id"} {
		_, err := input.CSVHeader(&failOnce{data: data, err: errDisk}, "in.csv")
		if _, ok := errors.AsType[*input.Error](err); !ok || !errors.Is(err, errDisk) || err.Error() != "in.csv:1: read: disk gone" {
			t.Errorf("CSVHeader of %q then a read error = %v; want *InputError %q", data, err, "in.csv:1: read: disk gone")
		}
		var errs []error
		for _, err := range input.CSV(&failOnce{data: data, err: errDisk}, "in.csv") {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], errDisk) || errs[0].Error() != "in.csv:1: read: disk gone" {
			t.Errorf("CSV of %q then a read error yields errors %v; want one %q", data, errs, "in.csv:1: read: disk gone")
		}
	}
}

func TestJSONLFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		want    []string
		wantErr string
	}{
		{"first object, keys sorted", "{\"b\":1,\"a\":{\"c\":2}}\n{\"z\":1}\n", []string{"a", "b"}, ""},
		{"BOM, blank lines, bad lines before", "\xEF\xBB\xBF\n[1]\n\n{\"id\":1}\n", []string{"id"}, ""},
		{"empty object", "{}\n", []string{}, ""},
		{"no object decodes", "[1]\n{\"a\":\n", nil, "in.jsonl:1: not a JSON object: found an array"},
		{"empty", " \n\r\n", nil, "in.jsonl:1: empty input: no JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := input.JSONLFields(strings.NewReader(tt.input), "in.jsonl")
			if tt.wantErr != "" {
				if _, ok := errors.AsType[*input.Error](err); !ok || err.Error() != tt.wantErr {
					t.Fatalf("JSONLFields(%q) = %q, %v; want *Error %q", tt.input, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got == nil {
				t.Fatalf("JSONLFields(%q) = %#v, %v; want a non-nil slice", tt.input, got, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("JSONLFields(%q) mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}
