package job

import (
	"bytes"
	"encoding/json"
)

// Input is one input row: field name → value. Rows read by input.JSONL hold
// the values encoding/json decodes with UseNumber (string, json.Number,
// bool, nil, map[string]any, []any); rows read by input.CSV hold strings.
type Input map[string]any

// Same reports whether in and other are the same input: equal once both
// are JSON in one canonical form (keys sorted, numbers as their text), so
// a row decoded from a file, a row restored from a checkpoint and a row of
// Go values (structs, typed maps) compare by what they hold. An input that
// cannot be encoded as JSON is the same as nothing. Empty and nil inputs
// are the same.
func (in Input) Same(other Input) bool {
	if len(in) == 0 && len(other) == 0 {
		return true
	}
	a, err := in.canonical()
	if err != nil {
		return false
	}
	b, err := json.Marshal(other)
	if err != nil {
		return false
	}
	if bytes.Equal(a, b) {
		return true // the common case: other's values need no re-encoding
	}
	// Values of Go types (structs, typed maps) marshal in their own field
	// order: decode and encode again, as in's were.
	if b, err = other.canonical(); err != nil {
		return false
	}
	return bytes.Equal(a, b)
}

// canonical returns in as JSON with every object's keys sorted and numbers
// kept as their text.
func (in Input) canonical() ([]byte, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
