package config_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/job"
)

// tiersJob sets the keys of packing, the time budget and fallback tiers.
const tiersJob = `task: "Plan for {npc}"
pack: {max_agents: 20, max_prompt_tokens: 4000}
limits:
  timeout: 10s
  budget: 2s
fallbacks:
  - backend: openai://
    model: small
    api_key_env: FALLBACK_KEY
  - {backend: "sim://?seed=2"}
`

// TestParseTiersAndPack checks that pack and limits.budget land in the
// Def, the fallbacks' backends in Job.Fallbacks in file order, and that the
// Def, with a model opened for each fallback, is one NewSpec takes.
func TestParseTiersAndPack(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte(tiersJob), "job.yaml", "/jobs")
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	want := &config.Job{
		Def: job.Def{
			Task:    "Plan for {npc}",
			Timeout: 10 * time.Second,
			Budget:  2 * time.Second,
			Pack:    job.Pack{MaxAgents: 20, MaxPromptTokens: 4000},
		},
		Backend: config.DefaultBackend,
		Fallbacks: []config.FallbackBackend{
			{Backend: "openai://", Model: "small", APIKeyEnv: "FALLBACK_KEY"},
			{Backend: "sim://?seed=2"},
		},
		Dir:  "/jobs",
		Path: "job.yaml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}

	d := got.Def
	d.Model = nopModel{}
	for _, f := range got.Fallbacks {
		d.Fallbacks = append(d.Fallbacks, batchagent.Fallback{Model: nopModel{}, ModelName: f.Model})
	}
	spec, err := batchagent.NewSpec(d)
	if err != nil {
		t.Fatalf("NewSpec(the parsed Def) error = %v", err)
	}
	if budget, tiers := spec.Budget(); budget != 2*time.Second || len(tiers) != 2 {
		t.Errorf("spec.Budget() = %v, %d tiers, want 2s, 2 tiers", budget, len(tiers))
	}
	if p := spec.Pack(); p != (job.Pack{MaxAgents: 20, MaxPromptTokens: 4000}) {
		t.Errorf("spec.Pack() = %+v, want 20 agents, 4000 tokens", p)
	}
}

// TestParsePackDefaults checks that max_prompt_tokens may be left out (the
// engine's default applies) and that fallbacks need no budget (the
// default budget applies).
func TestParsePackDefaults(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte("task: x\npack: {max_agents: 8}\nfallbacks: [{backend: \"sim://\"}]\n"), "job.yaml", "/jobs")
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	if got.Def.Pack != (job.Pack{MaxAgents: 8}) || got.Def.Budget != 0 {
		t.Errorf("Parse() pack %+v, budget %v, want 8 agents and no prompt cap, no budget", got.Def.Pack, got.Def.Budget)
	}
	if diff := cmp.Diff([]config.FallbackBackend{{Backend: "sim://"}}, got.Fallbacks); diff != "" {
		t.Errorf("Parse().Fallbacks (-want +got):\n%s", diff)
	}
}

// TestParsePackAuto checks the ways a job file asks for automatic
// packing: the word auto, true, a mapping without max_agents (a job that
// asks for packing without a size), or auto with a size and checks; and
// that each reads back the same once marshalled.
func TestParsePackAuto(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want job.Pack
	}{
		{"pack: auto", job.Pack{MaxAgents: job.DefaultPackAutoAgents, Auto: true}},
		{"pack: true", job.Pack{MaxAgents: job.DefaultPackAutoAgents, Auto: true}},
		{"pack: false", job.Pack{}},
		{"pack: {verify: 0.02}", job.Pack{MaxAgents: job.DefaultPackAutoAgents, Auto: true, Verify: 0.02}},
		{"pack: {max_agents: 12, auto: true, verify: 0.02, min_agreement: 0.8}", job.Pack{MaxAgents: 12, Auto: true, Verify: 0.02, MinAgreement: 0.8}},
		{"pack: {max_agents: 12}", job.Pack{MaxAgents: 12}},
	} {
		got, err := config.Parse([]byte("task: x\n"+tt.in+"\n"), "job.yaml", "/jobs")
		if err != nil {
			t.Errorf("Parse(%q) error = %v", tt.in, err)
			continue
		}
		if got.Def.Pack != tt.want {
			t.Errorf("Parse(%q) pack = %+v, want %+v", tt.in, got.Def.Pack, tt.want)
		}
		b, err := yaml.Marshal(got)
		if err != nil {
			t.Fatalf("Marshal(%q) error = %v", tt.in, err)
		}
		again, err := config.Parse(b, "job.yaml", "/jobs")
		if err != nil || again.Def.Pack != tt.want {
			t.Errorf("Parse(Marshal(%q)) = %+v, %v; want %+v (marshalled: %s)", tt.in, again.Def.Pack, err, tt.want, b)
		}
	}
}

func TestParseTiersAndPackProblems(t *testing.T) {
	t.Parallel()
	runProblemCases(t, t.TempDir(), []problemCase{
		{
			name: "pack of one",
			in:   "task: x\npack: {max_agents: 1}\n",
			want: []config.Problem{{Line: 2, Col: 20, Path: "pack.max_agents",
				Msg: "must be at least 2, got 1: a pack of one agent is no pack (leave pack out to give each agent its own calls)"}},
		},
		{
			name: "pack of none",
			in:   "task: x\npack:\n  max_agents: 0\n",
			want: []config.Problem{{Line: 3, Col: 15, Path: "pack.max_agents", Msg: "must be at least 2, got 0"}},
		},
		{
			name: "pack verifying more than all",
			in:   "task: x\npack: {verify: 1.5}\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "pack.verify", Msg: "must be between 0 and 1 (a share), got 1.5"}},
		},
		{
			name: "pack agreeing less than none",
			in:   "task: x\npack:\n  max_agents: 8\n  min_agreement: -0.5\n",
			want: []config.Problem{{Line: 4, Col: 18, Path: "pack.min_agreement", Msg: "must be between 0 and 1 (a share), got -0.5"}},
		},
		{
			name: "pack of an unknown word",
			in:   "task: x\npack: always\n",
			want: []config.Problem{{Line: 2, Col: 7, Path: "pack", Msg: "expected auto, true, false or a mapping of max_agents, max_prompt_tokens, auto, verify and min_agreement, got \"always\""}},
		},
		{
			name: "pack with no prompt tokens",
			in:   "task: x\npack: {max_agents: 4, max_prompt_tokens: -1}\n",
			want: []config.Problem{{Line: 2, Col: 42, Path: "pack.max_prompt_tokens", Msg: "must be at least 1, got -1"}},
		},
		{
			name: "pack with tools",
			in:   "task: x\ntools:\n  - name: http_get\npack: {max_agents: 4}\n",
			want: []config.Problem{{Line: 4, Col: 7, Path: "pack", Msg: "pack cannot go with tools: a packed agent gets one answer and calls no tools"}},
		},
		{
			name: "pack with tools and mcp",
			in:   "task: x\npack: {max_agents: 4}\ntools: [{name: http_get}]\nmcp: [{name: a, url: \"http://127.0.0.1:1/mcp\"}]\n",
			want: []config.Problem{{Line: 2, Col: 7, Path: "pack", Msg: "pack cannot go with tools and mcp: a packed agent gets one answer and calls no tools"}},
		},
		{
			name: "pack of the wrong type",
			in:   "task: x\npack: 20\n",
			want: []config.Problem{{Line: 2, Col: 7, Path: "pack", Msg: "expected auto, true, false or a mapping of max_agents, max_prompt_tokens, auto, verify and min_agreement, got 20"}},
		},
		{
			name: "pack with an unknown key",
			in:   "task: x\npack: {max_agent: 4}\n",
			want: []config.Problem{
				{Line: 2, Col: 8, Path: "pack.max_agent", Msg: `unknown key "max_agent" (did you mean "max_agents"?)`},
			},
		},
		{
			name: "budget without fallbacks",
			in:   "task: x\nlimits:\n  budget: 2s\n",
			want: []config.Problem{{Line: 3, Col: 11, Path: "limits.budget",
				Msg: "budget without fallbacks has no effect: list fallbacks to answer from once it runs out, or bound each agent with limits.timeout"}},
		},
		{
			name: "zero budget",
			in:   "task: x\nlimits: {budget: 0s}\nfallbacks: [{backend: \"sim://\"}]\n",
			want: []config.Problem{{Line: 2, Col: 18, Path: "limits.budget", Msg: "must be positive, got 0s"}},
		},
		{
			name: "negative budget",
			in:   "task: x\nlimits: {budget: -2s}\nfallbacks: [{backend: \"sim://\"}]\n",
			want: []config.Problem{{Line: 2, Col: 18, Path: "limits.budget", Msg: "must be positive, got -2s"}},
		},
		{
			name: "budget without a unit",
			in:   "task: x\nlimits: {budget: 2}\nfallbacks: [{backend: \"sim://\"}]\n",
			want: []config.Problem{{Line: 2, Col: 18, Path: "limits.budget", Msg: `invalid duration 2: want a duration like "30s"`}},
		},
		{
			name: "fallback backends",
			in:   "task: x\nfallbacks:\n  - model: m\n  - backend: localhost\n  - backend: '://x'\n  - backend: ''\n  - {backend: \"sim://\", modle: m}\n  - sim://\n",
			want: []config.Problem{
				{Line: 3, Col: 5, Path: "fallbacks[0].backend", Msg: `required key is missing (a backend URL, such as "sim://")`},
				{Line: 4, Col: 14, Path: "fallbacks[1].backend", Msg: `backend URL "localhost" has no scheme (for example "sim://" or "openai://")`},
				{Line: 5, Col: 14, Path: "fallbacks[2].backend", Msg: "invalid backend URL: missing protocol scheme"},
				{Line: 6, Col: 14, Path: "fallbacks[3].backend", Msg: `must not be empty (a backend URL, such as "sim://")`},
				{Line: 7, Col: 25, Path: "fallbacks[4].modle", Msg: `unknown key "modle" (did you mean "model"?)`},
				{Line: 8, Col: 5, Path: "fallbacks[5]", Msg: `expected a mapping, got "sim://"`},
			},
		},
		{
			name: "fallbacks not a list",
			in:   "task: x\nfallbacks: {backend: \"sim://\"}\n",
			want: []config.Problem{{Line: 2, Col: 12, Path: "fallbacks", Msg: "expected a list, got a mapping"}},
		},
	})
}

// TestParseServeAgentTiers checks that a gateway's agents take the new
// keys as a job file does, problems reported under the agent's path.
func TestParseServeAgentTiers(t *testing.T) {
	t.Parallel()
	const good = `agents:
  npc:
    task: "Plan for {npc}"
    limits: {budget: 1s}
    fallbacks: [{backend: "sim://?seed=3", model: tiny}]
`
	const bad = good + `  bad:
    task: x
    pack: {max_agents: 1}
    fallbacks: [{model: m}]
`
	_, err := config.ParseServe([]byte(bad), "serve.yaml", t.TempDir())
	want := "serve.yaml:8:24: agents.bad.pack.max_agents: must be at least 2, got 1: a pack of one agent is no pack (leave pack out to give each agent its own calls)\n" +
		`serve.yaml:9:17: agents.bad.fallbacks[0].backend: required key is missing (a backend URL, such as "sim://")`
	if err == nil || err.Error() != want {
		t.Errorf("ParseServe(bad agent) error = %v, want\n%s", err, want)
	}
	s, err := config.ParseServe([]byte(good), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatalf("ParseServe() error = %v", err)
	}
	j := s.Agents[0].Job
	if diff := cmp.Diff([]config.FallbackBackend{{Backend: "sim://?seed=3", Model: "tiny"}}, j.Fallbacks); diff != "" || j.Def.Budget != time.Second {
		t.Errorf("ParseServe() agent npc: budget %v, fallbacks (-want +got):\n%s", j.Def.Budget, diff)
	}
}
