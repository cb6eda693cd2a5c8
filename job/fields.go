package job

import "slices"

// MissingFields compares the fields t refers to with have, the field names
// an input source provides (a CSV header, the keys of a JSONL object). For
// each top-level field that t uses and have lacks, it returns the first
// placeholder that uses it, as written ("user.name" for {user.name} when
// have lacks "user"), in the order of first use in t. It returns nil when
// have holds every field. Only top-level names are compared: what lies
// below them depends on each input.
func (t *Template) MissingFields(have []string) []string {
	var missing, seen []string
	for _, p := range t.parts {
		if p.path == nil || slices.Contains(seen, p.path[0]) {
			continue
		}
		seen = append(seen, p.path[0])
		if !slices.Contains(have, p.path[0]) {
			missing = append(missing, p.name)
		}
	}
	return missing
}
