package config_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/internal/config"
)

func TestParseInlineSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string // the output_schema value, in flow style
		want   string
	}{
		{
			name:   "key order kept",
			schema: `{type: object, required: [b, a], properties: {b: {type: string}, a: {type: integer}}}`,
			want:   `{"type":"object","required":["b","a"],"properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`,
		},
		{
			name:   "scalars",
			schema: `{i: 10, neg: -3, hex: 0x1F, f: 1.5, exp: 2e3, t: true, n: ~, s: "10", date: 2001-12-14, on: on}`,
			want:   `{"i":10,"neg":-3,"hex":31,"f":1.5,"exp":2000,"t":true,"n":null,"s":"10","date":"2001-12-14","on":"on"}`,
		},
		{
			name:   "strings escaped for JSON but not for HTML",
			schema: `{pattern: "^a\\d+\"<&>$", desc: "tab\there"}`,
			want:   `{"pattern":"^a\\d+\"<&>$","desc":"tab\there"}`,
		},
		{
			name:   "empty mapping",
			schema: `{}`,
			want:   `{}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := "task: x\noutput_schema: " + tt.schema + "\n"
			j, err := config.Parse([]byte(in), "job.yaml", "/jobs")
			if err != nil {
				t.Fatalf("Parse(%q) error = %v", in, err)
			}
			if got := string(j.Def.OutputSchema); got != tt.want {
				t.Errorf("Parse(%q).Def.OutputSchema = %s, want %s", in, got, tt.want)
			}
			if !json.Valid(j.Def.OutputSchema) {
				t.Errorf("Parse(%q).Def.OutputSchema = %s, not valid JSON", in, j.Def.OutputSchema)
			}
			if j.SchemaFile != "" {
				t.Errorf("Parse(%q).SchemaFile = %q, want empty", in, j.SchemaFile)
			}
		})
	}
}

// schemaOf is a decoded output schema and the file it came from.
type schemaOf struct {
	JSON json.RawMessage
	File string
}

func TestParseSchemaFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "schemas/out.json", "{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"pattern\": \"<b>\"}}\n}\n")
	writeFile(t, dir, "schemas/out.yaml", "type: object\nproperties:\n  a: {type: integer, minimum: 1}\n")
	writeFile(t, dir, "out.yml", "type: object\n")

	tests := []struct {
		name string
		path string // as written in the job file
		want schemaOf
	}{
		{
			name: "json",
			path: "schemas/out.json",
			want: schemaOf{
				JSON: json.RawMessage(`{"type":"object","properties":{"a":{"pattern":"<b>"}}}`),
				File: filepath.Join(dir, "schemas", "out.json"),
			},
		},
		{
			name: "yaml",
			path: "schemas/out.yaml",
			want: schemaOf{
				JSON: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","minimum":1}}}`),
				File: filepath.Join(dir, "schemas", "out.yaml"),
			},
		},
		{
			name: "yml absolute",
			path: filepath.Join(dir, "out.yml"),
			want: schemaOf{
				JSON: json.RawMessage(`{"type":"object"}`),
				File: filepath.Join(dir, "out.yml"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := "task: x\noutput_schema: " + tt.path + "\n"
			j, err := config.Parse([]byte(in), "job.yaml", dir)
			if err != nil {
				t.Fatalf("Parse(%q) error = %v", in, err)
			}
			if diff := cmp.Diff(tt.want, schemaOf{j.Def.OutputSchema, j.SchemaFile}); diff != "" {
				t.Errorf("Parse(%q).OutputSchema mismatch (-want +got):\n%s", in, diff)
			}
		})
	}
}
