package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/schema"
)

func TestCheckError(t *testing.T) {
	t.Parallel()
	own := &schema.ValidationError{Problems: []schema.Problem{{Path: "$.end", Message: "end is before start"}}, Raw: `{}`}
	tests := []struct {
		name string
		err  error
		want *schema.ValidationError
		same bool // want the very *ValidationError of err
	}{
		{name: "nil", err: nil, want: nil},
		{
			name: "plain error",
			err:  errors.New("total is 12, but the items add up to 10"),
			want: &schema.ValidationError{Problems: []schema.Problem{{Path: "$", Message: "total is 12, but the items add up to 10"}}},
		},
		{
			name: "wrapped plain error",
			err:  fmt.Errorf("invoice: %w", errors.New("unknown customer ID 42")),
			want: &schema.ValidationError{Problems: []schema.Problem{{Path: "$", Message: "invoice: unknown customer ID 42"}}},
		},
		{name: "validation error", err: own, want: own, same: true},
		{name: "wrapped validation error", err: fmt.Errorf("check: %w", own), want: own, same: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := schema.CheckError(tt.err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CheckError(%v) mismatch (-want +got):\n%s", tt.err, diff)
			}
			if tt.same && got != own {
				t.Errorf("CheckError(%v) = %p, want the error's own %p", tt.err, got, own)
			}
		})
	}
}

func TestCheckErrorFeedback(t *testing.T) {
	t.Parallel()
	var check schema.CheckFunc = func(json.RawMessage) error {
		return errors.New("the end date 2025-01-01 is before the start date 2025-02-01")
	}
	got := schema.Feedback(schema.CheckError(check(json.RawMessage(`{"start":"2025-02-01","end":"2025-01-01"}`))))
	want := "Your answer does not match the required JSON Schema. Problems:\n" +
		"- $: the end date 2025-01-01 is before the start date 2025-02-01\n" +
		"Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences."
	if got != want {
		t.Errorf("Feedback(CheckError(...)) = %q, want %q", got, want)
	}
}
