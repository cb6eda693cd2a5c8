package job_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/job"
)

func TestInputSame(t *testing.T) {
	t.Parallel()
	type row struct {
		B string `json:"b"`
		A int    `json:"a"`
	}
	tests := []struct {
		name string
		a, b job.Input
		want bool
	}{
		{"both empty", nil, job.Input{}, true},
		{"key order", job.Input{"a": "1", "b": "2"}, job.Input{"b": "2", "a": "1"}, true},
		{"number text kept", job.Input{"n": json.Number("1234567890123456789")}, job.Input{"n": json.Number("1234567890123456788")}, false},
		{"json number and float", job.Input{"n": json.Number("2")}, job.Input{"n": 2.0}, true},
		{"nested Go struct", job.Input{"r": map[string]any{"a": json.Number("1"), "b": "x"}}, job.Input{"r": row{B: "x", A: 1}}, true},
		{"changed value", job.Input{"id": "a"}, job.Input{"id": "b"}, false},
		{"extra key", job.Input{"id": "a"}, job.Input{"id": "a", "x": nil}, false},
		{"not encodable", job.Input{"f": func() {}}, job.Input{"f": nil}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.a.Same(tt.b); got != tt.want {
				t.Errorf("%v.Same(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Same(tt.a); got != tt.want {
				t.Errorf("%v.Same(%v) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}
