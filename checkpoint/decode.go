package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
)

// unmarshalState decodes a stored state (or part of one) into v keeping
// numbers as their JSON text: an input's values come back as the
// json.Number values the inputs were read with, so that an integer above
// 2^53 or a number out of float64's range such as 1e999 is restored and
// exported exactly as it was given, never rounded or refused.
func unmarshalState(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("invalid character after top-level value")
	}
	return nil
}
