package outfile_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/internal/outfile"
)

func TestColumns(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []outfile.Column
	}{
		{"no schema", "", []outfile.Column{{Name: "output", Type: outfile.TypeString}}},
		{"not an object", `{"type":"string"}`, []outfile.Column{{Name: "output", Type: outfile.TypeString}}},
		{"declared order and types", `{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":["number","null"]},"ok":{"type":"boolean"},"s":{"type":"string"},"o":{"type":"object"},"m":{"type":["string","integer"]},"cost":{"type":"number"}}}`,
			[]outfile.Column{
				{Name: "z", Property: "z", Type: outfile.TypeInteger},
				{Name: "a", Property: "a", Type: outfile.TypeNumber},
				{Name: "ok", Property: "ok", Type: outfile.TypeBoolean},
				{Name: "s", Property: "s", Type: outfile.TypeString},
				{Name: "o", Property: "o", Type: outfile.TypeJSON},
				{Name: "m", Property: "m", Type: outfile.TypeJSON},
				{Name: "output.cost", Property: "cost", Type: outfile.TypeNumber},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := outfile.Columns(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Columns(%s) (-want +got):\n%s", tt.schema, diff)
			}
		})
	}
	if _, err := outfile.Columns(json.RawMessage(`{"properties":[1]}`)); err == nil {
		t.Error("Columns of a schema whose properties are an array: no error")
	}
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]outfile.Format{"r.csv": outfile.CSV, "R.PARQUET": outfile.Parquet, "r.jsonl": outfile.JSONL, "r": outfile.JSONL} {
		if got := outfile.FormatOf(path); got != want {
			t.Errorf("FormatOf(%q) = %v, want %v", path, got, want)
		}
	}
}
