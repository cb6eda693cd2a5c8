package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Pack lets the agents of a job share model calls: waiting inputs are
// grouped into one call that carries the shared prefix once, then each
// agent's task under an id, and asks for one JSON object keyed by those
// ids whose values follow the output schema. Each agent's result is
// delivered as soon as its value has streamed in whole; an entry that is
// missing, invalid or named twice sends only its agent to run alone, with
// the usual agent loop. The zero value packs nothing.
//
// Only jobs without tools can pack: a packed agent gets one answer, no
// tool turns. Packing suits many tiny tasks (classify a sentence, tag a
// product) whose answers are small beside the shared prefix.
type Pack struct {
	// MaxAgents caps the agents of one call; packing is on when it is 2 or
	// more. The engine starts at this size, halves it when answers come
	// back cut at the token cap or mostly invalid, and grows it back by
	// one per clean answer.
	MaxAgents int
	// MaxPromptTokens caps the estimated prompt tokens of one call (shared
	// prefix and tasks, counted at 4 bytes a token); an agent whose task
	// alone is over it gets a call of its own. Defaults to
	// DefaultPackPromptTokens.
	MaxPromptTokens int
	// Auto lets the engine choose, from what it measures, whether to pack
	// and how many tasks a call, up to MaxAgents.
	Auto bool
}

// DefaultPackPromptTokens is Pack.MaxPromptTokens when unset.
const DefaultPackPromptTokens = 8192

// On reports whether p packs agents: MaxAgents is 2 or more.
func (p Pack) On() bool { return p.MaxAgents >= 2 }

// Pack returns the job's packing, defaults filled in; its zero value when
// the job does not pack.
func (s *Spec) Pack() Pack { return s.def.Pack }

// packable reports whether answers that follow the output schema entry
// can be packed: its local references ("$ref" values starting with "#")
// must point into its "$defs" or "definitions", which the packing
// protocol (internal/pack.Schema) moves to the pack's root; a
// reference to the entry's root ("#") or its other parts would point
// elsewhere in a pack.
func packable(entry json.RawMessage) error {
	var v any
	if len(bytes.TrimSpace(entry)) == 0 {
		return nil
	}
	if err := json.Unmarshal(entry, &v); err != nil {
		return fmt.Errorf("pack: output schema: %w", err)
	}
	return checkRefs(v)
}

func checkRefs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#") &&
			!strings.HasPrefix(ref, "#/$defs/") && !strings.HasPrefix(ref, "#/definitions/") {
			return fmt.Errorf("pack: output schema: $ref %q points outside $defs and definitions: a packed answer cannot resolve it", ref)
		}
		for _, x := range v {
			if err := checkRefs(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := checkRefs(x); err != nil {
				return err
			}
		}
	}
	return nil
}
