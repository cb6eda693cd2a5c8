package config

import "strings"

// validatePack checks that a pack asks for at least two agents per call,
// that its prompt cap is positive, and that the job has no tools, which
// packed agents cannot call.
func (d *decoder) validatePack(j *Job) {
	n := d.nodes["pack"]
	if n == nil || isNull(n) || !d.ok("pack") {
		return
	}
	p := j.Def.Pack
	const ap = "pack.max_agents"
	switch an := d.nodes[ap]; {
	case !d.ok(ap):
	case an == nil || isNull(an):
		d.report(n, ap, "required key is missing (the most agents one model call answers, 2 or more)")
	case p.MaxAgents == 1:
		d.report(an, ap, "must be at least 2, got 1: a pack of one agent is no pack (leave pack out to give each agent its own calls)")
	case p.MaxAgents < 2:
		d.report(an, ap, "must be at least 2, got %d", p.MaxAgents)
	}
	const tp = "pack.max_prompt_tokens"
	if tn := d.nodes[tp]; tn != nil && !isNull(tn) && d.ok(tp) && p.MaxPromptTokens < 1 {
		d.report(tn, tp, "must be at least 1, got %d", p.MaxPromptTokens)
	}
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
