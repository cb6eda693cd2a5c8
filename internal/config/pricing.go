package config

import (
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/llm"
)

// pricingField is the job's pricing mapping: per million tokens, what the
// model's input, cached input, output and cache writes cost. Each must be a finite
// number, not negative.
type pricingField struct{ p **llm.Price }

func pricingKeys(p *llm.Price) keys {
	return keys{{"input", &p.Input}, {"cached_input", &p.CachedInput}, {"output", &p.Output}, {"cache_write", &p.CacheWrite}}
}

func (f pricingField) decode(d *decoder, n *yaml.Node, path string) {
	p := new(llm.Price)
	ks := pricingKeys(p)
	d.table(n, path, ks)
	if !d.ok(path) {
		return
	}
	for _, k := range ks {
		kp := join(path, k.name)
		if v := *k.dst.(*float64); math.IsNaN(v) || math.IsInf(v, 0) {
			d.report(d.at(kp), kp, "must be a finite number, got %v", v)
			continue
		}
		d.checkNotNegative(kp, k.dst)
	}
	*f.p = p
}

func (f pricingField) encode() (any, error) {
	if *f.p == nil {
		return nil, nil
	}
	n, err := encodeTable(pricingKeys(*f.p))
	if n == nil && err == nil {
		// Free: all zero, which is not the same as no pricing.
		n = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	}
	return n, err
}
