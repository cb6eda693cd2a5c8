package job

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
}

// DefaultPackPromptTokens is Pack.MaxPromptTokens when unset.
const DefaultPackPromptTokens = 8192

// On reports whether p packs agents: MaxAgents is 2 or more.
func (p Pack) On() bool { return p.MaxAgents >= 2 }

// Pack returns the job's packing, defaults filled in; its zero value when
// the job does not pack.
func (s *Spec) Pack() Pack { return s.def.Pack }
