package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/job"
)

// The words of the pack key.
const packAuto = "auto"

// packField is the pack key: auto (or true) lets the engine choose
// whether and how much to pack, up to job.DefaultPackAutoAgents a call;
// false packs nothing; a mapping sets max_agents, max_prompt_tokens,
// auto, verify and min_agreement. A mapping without max_agents is auto:
// a job that asks for packing without a size lets the engine choose it.
type packField struct{ p *job.Pack }

func packKeys(p *job.Pack) keys {
	return keys{
		{"max_agents", &p.MaxAgents},
		{"max_prompt_tokens", &p.MaxPromptTokens},
		{"auto", &p.Auto},
		{"verify", &p.Verify},
		{"min_agreement", &p.MinAgreement},
	}
}

func (f packField) decode(d *decoder, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		switch {
		case n.Value == packAuto, n.ShortTag() == "!!bool" && n.Value == "true":
			*f.p = job.Pack{MaxAgents: job.DefaultPackAutoAgents, Auto: true}
		case n.ShortTag() == "!!bool" && n.Value == "false":
			*f.p = job.Pack{}
		default:
			d.problem(n, path, "expected auto, true, false or a mapping of max_agents, max_prompt_tokens, auto, verify and min_agreement, got %s", describe(n))
		}
	case yaml.MappingNode:
		d.table(n, path, packKeys(f.p))
		if an := d.nodes[join(path, "max_agents")]; an == nil || isNull(an) {
			f.p.Auto = true
			f.p.MaxAgents = job.DefaultPackAutoAgents
		}
	default:
		d.problem(n, path, "expected auto, true, false or a mapping of max_agents, max_prompt_tokens, auto, verify and min_agreement, got %s", describe(n))
	}
}

func (f packField) encode() (any, error) {
	p := *f.p
	switch {
	case !p.On():
		return nil, nil
	case p == job.Pack{MaxAgents: job.DefaultPackAutoAgents, Auto: true}:
		return packAuto, nil
	}
	return encodeTable(packKeys(&p))
}

// validatePack checks that a pack asks for at least two agents per call,
// that its prompt cap is positive, its verify share and min agreement
// between 0 and 1, and that the job has no tools, which packed agents
// cannot call.
func (d *decoder) validatePack(j *Job) {
	n := d.nodes["pack"]
	if n == nil || isNull(n) || !d.ok("pack") || !j.Def.Pack.On() && n.Kind == yaml.ScalarNode {
		return
	}
	p := j.Def.Pack
	const ap = "pack.max_agents"
	switch an := d.nodes[ap]; {
	case !d.ok(ap) || an == nil || isNull(an):
	case p.MaxAgents == 1:
		d.report(an, ap, "must be at least 2, got 1: a pack of one agent is no pack (leave pack out to give each agent its own calls)")
	case p.MaxAgents < 2:
		d.report(an, ap, "must be at least 2, got %d", p.MaxAgents)
	}
	const tp = "pack.max_prompt_tokens"
	if tn := d.nodes[tp]; tn != nil && !isNull(tn) && d.ok(tp) && p.MaxPromptTokens < 1 {
		d.report(tn, tp, "must be at least 1, got %d", p.MaxPromptTokens)
	}
	share := func(path string, v float64) {
		if sn := d.nodes[path]; sn != nil && !isNull(sn) && d.ok(path) && (v < 0 || v > 1) {
			d.report(sn, path, "must be between 0 and 1 (a share), got %g", v)
		}
	}
	share("pack.verify", p.Verify)
	share("pack.min_agreement", p.MinAgreement)
	var with []string
	if len(j.Tools) > 0 {
		with = append(with, "tools")
	}
	if len(j.MCP) > 0 {
		with = append(with, "mcp")
	}
	if len(with) > 0 {
		d.report(n, "pack", "pack cannot go with %s: a packed agent gets one answer and calls no tools", strings.Join(with, " and "))
	}
}
