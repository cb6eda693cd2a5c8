package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Pack lets the agents of a job share model calls: waiting inputs are
// grouped into one call that carries the shared prefix once, then each
// agent's task under an id, and asks for one JSON object keyed by those
// ids whose values follow the output schema. Each agent's result is
// delivered as soon as its value has streamed in whole; an entry that is
// missing, invalid or named twice sends only its agent to run alone, with
// the usual agent loop. The zero value packs nothing.
//
// With Auto, the engine decides per backend, continuously, whether packing
// pays and at what size, from what it measures (see internal/engine's
// package doc, "Automatic packing"): agents run alone (unpacked) while a
// few cheap probe packs of 4 measure the time a task takes packed
// against alone (the call's latency, its wait for admission, so the
// requests- or tokens-per-minute limit that binds, and the prefill a
// prefix cache spares all show in it). Packing starts only when a packed
// task costs clearly less than one alone (a slot-bound server with a
// prefix cache and free slots gains nothing from it); packs then grow by
// doubling while the time per task falls, and are halved when a call
// takes longer than DefaultPackLatencyBudget, when answers come back cut
// or mostly invalid, or when checked answers (Verify) agree less than
// MinAgreement.
//
// Only jobs without tools can pack: a packed agent gets one answer, no
// tool turns. Packing suits many tiny tasks (classify a sentence, tag a
// product) whose answers are small beside the shared prefix.
type Pack struct {
	// MaxAgents caps the agents of one call; packing is on when it is 2 or
	// more. Without Auto the engine starts at this size, halves it when
	// answers come back cut at the token cap or mostly invalid, and grows
	// it back by one per clean answer.
	MaxAgents int
	// MaxPromptTokens caps the estimated prompt tokens of one call (shared
	// prefix and tasks, counted at 4 bytes a token); an agent whose task
	// alone is over it gets a call of its own. Defaults to
	// DefaultPackPromptTokens.
	MaxPromptTokens int
	// Auto lets the engine choose, from what it measures, whether to pack
	// and how many tasks a call, up to MaxAgents.
	Auto bool
	// Verify is the share of packed answers checked (0 to 1): a sampled
	// agent's packed answer is compared (as canonical JSON) with the
	// answer its task gets alone, and the agent's result is the alone
	// answer, the checked one. Zero checks none.
	Verify float64
	// MinAgreement is the share of checked packed answers that must agree
	// with their alone answers: below it, over the last
	// PackAgreementWindow checks, packs are halved (down to none) and
	// the log says so. Defaults to DefaultPackMinAgreement when Verify is
	// set.
	MinAgreement float64
}

// DefaultPackPromptTokens is Pack.MaxPromptTokens when unset.
const DefaultPackPromptTokens = 8192

// DefaultPackMinAgreement is Pack.MinAgreement when Verify is set and
// MinAgreement is not.
const DefaultPackMinAgreement = 0.9

// DefaultPackAutoAgents is Pack.MaxAgents of a job file's `pack: auto`.
const DefaultPackAutoAgents = 20

// PackAgreementWindow is how many of the latest checked packed answers
// Pack.MinAgreement is measured over.
const PackAgreementWindow = 20

// DefaultPackLatencyBudget is how long an automatic pack's call may take
// before packs are halved (Pack.Auto): a pack slower than this answers
// its agents later than several smaller ones would. A job with a Timeout
// uses a quarter of it when that is shorter.
const DefaultPackLatencyBudget = 5 * time.Second

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
