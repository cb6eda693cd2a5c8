package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/batchagent/batchagent/agent"
)

// unmarshalState decodes a stored state (or part of one) into st keeping
// numbers as their JSON text: an input's values come back as the
// json.Number values the inputs were read with, so that an integer above
// 2^53 or a number out of float64's range such as 1e999 is restored and
// exported exactly as it was given, never rounded or refused. A state of
// an older format (its failure in err_* members) is read too; see
// [agent.DecodeState].
func unmarshalState(data []byte, st *agent.State) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := agent.DecodeState(dec, st); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("invalid character after top-level value")
	}
	return nil
}
