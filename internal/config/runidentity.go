package config

import "go.yaml.in/yaml/v3"

// RunIdentity returns what of a job file's bytes makes a run over Redis
// the same run: the file with the value of limits.max_cost left out (kept
// as "set", so adding or removing a cap is another run, whose workers open
// the job with or without one). A run stopped at its spend cap and started
// again with a higher one is thus the same run: it keeps its results, its
// pending inputs and its spend ledger, as a local run does (its checkpoint
// fingerprint leaves the cap out). A file that sets no cap, or that does
// not parse, is its bytes as they are.
func RunIdentity(job []byte) []byte {
	var doc yaml.Node
	if yaml.Unmarshal(job, &doc) != nil || len(doc.Content) == 0 {
		return job
	}
	limits := mappingValue(doc.Content[0], "limits")
	if limits == nil {
		return job
	}
	maxCost := mappingValue(limits, "max_cost")
	if maxCost == nil || maxCost.Kind != yaml.ScalarNode {
		return job
	}
	maxCost.Value, maxCost.Tag, maxCost.Style = "set", "!!str", 0
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return job
	}
	return out
}

// mappingValue returns the value of key in the mapping m, or nil when m is
// no mapping or has no such key.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
