package job

import (
	"bufio"
	"encoding/csv"
	"io"
	"slices"
)

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

// CSVHeader reads the header row of a CSV input, as [CSV] does (a byte
// order mark and blank lines before it are skipped), and returns its names
// in column order. It reads r only as far as the header, through a buffer,
// so r should be reopened or rewound before it is read again. A header that
// [CSV] would refuse (an empty input, invalid CSV or UTF-8, an empty or
// repeated name) gives the *[InputError] that CSV would yield.
func CSVHeader(r io.Reader, source string) ([]string, error) {
	br := bufio.NewReader(r)
	if err := skipBOM(br); err != nil {
		err.Source = source
		return nil, err
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	header, err := readHeader(cr)
	if err != nil {
		err.Source = source
		return nil, err
	}
	return header, nil
}
