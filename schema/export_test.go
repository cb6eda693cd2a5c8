package schema

import "encoding/json"

// ValidateFull validates doc with the full validator only, skipping the fast
// path, so tests can check that both agree.
func (s *Schema) ValidateFull(doc json.RawMessage) error {
	if !json.Valid(doc) {
		return s.Validate(doc)
	}
	str := string(doc)
	return s.validate(decodeValid(str), str)
}

// HasFastPath reports whether the schema is in the fast subset.
func (s *Schema) HasFastPath() bool { return s.fast != nil }

// DecodeValid decodes valid JSON with the package's own decoder.
func DecodeValid(s string) any { return decodeValid(s) }
