package router

import (
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// TestMergeExtraOneChoice: a routed model answers one choice a call when
// any of its deployments does (the simulator over sim+http), so that a
// gateway fans n out rather than sending it to a deployment that ignores
// it; the fields sent on stay those both send on.
func TestMergeExtraOneChoice(t *testing.T) {
	oai := llm.ExtraFields{Verbatim: true}
	sim := llm.ExtraFields{Verbatim: true, OneChoice: true}
	anth := llm.ExtraFields{Translated: "top_k user"}
	for _, c := range []struct {
		name string
		a, b llm.ExtraFields
		want llm.ExtraFields
	}{
		{"openai+openai", oai, oai, oai},
		{"openai+sim", oai, sim, sim},
		{"sim+openai", sim, oai, sim},
		{"sim+anthropic", sim, anth, llm.ExtraFields{Translated: "top_k user", OneChoice: true}},
		{"anthropic+sim", anth, sim, llm.ExtraFields{Translated: "top_k user", OneChoice: true}},
		{"anthropic+translated", anth, llm.ExtraFields{Translated: "user", OneChoice: true}, llm.ExtraFields{Translated: "user", OneChoice: true}},
	} {
		if got := mergeExtra(c.a, c.b); got != c.want {
			t.Errorf("%s: mergeExtra = %+v, want %+v", c.name, got, c.want)
		}
	}
}
