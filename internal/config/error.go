package config

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one problem of a job file.
type Problem struct {
	// Line and Col are the 1-based position of the offending node. Col is 0
	// when only the line is known (YAML syntax errors), and Line is 0 when
	// neither is.
	Line, Col int
	// Path is the YAML path of the offending value, such as
	// "limits.max_turns" or "tools[0].roots[1]". It is empty for problems of
	// the file as a whole.
	Path string
	// Msg says what is wrong, in lowercase without a trailing period.
	Msg string
}

// Error lists every problem of a job file. [Load] and [Parse] return it
// with Problems sorted by line, then column.
type Error struct {
	// File is the job file name as given to Load or Parse.
	File string
	// Problems are the problems found; there is at least one.
	Problems []Problem
}

// Error returns one line per problem, sorted by line then column, in the
// form "job.yaml:7:3: limits.max_turnz: unknown key ...". The column is
// left out when it is unknown, and the path when it is empty.
func (e *Error) Error() string {
	ps := slices.Clone(e.Problems)
	sortProblems(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
			if p.Col > 0 {
				fmt.Fprintf(&b, ":%d", p.Col)
			}
		}
		b.WriteString(": ")
		if p.Path != "" {
			b.WriteString(p.Path)
			b.WriteString(": ")
		}
		b.WriteString(p.Msg)
	}
	if len(ps) == 0 {
		b.WriteString(e.File)
		b.WriteString(": invalid job file")
	}
	return b.String()
}

func newError(file string, ps []Problem) *Error {
	ps = slices.Clone(ps)
	sortProblems(ps)
	// The same node can be reported twice when a merged mapping is merged
	// in more than one place; keep the first report.
	ps = slices.Compact(ps)
	return &Error{File: file, Problems: ps}
}

func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}

// yamlErrLine matches the position prefix of yaml.v3's syntax errors, as
// in "yaml: line 3: did not find expected key".
var yamlErrLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// parserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. yaml.v3 prints their line 0-based (go-yaml/yaml#205).
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// unplacedProblems are fragments of yaml.v3 errors that come without a
// position: errors of its input reader and of anchors.
var unplacedProblems = []string{"UTF-8", "UTF-16", "Unicode", "control characters", "input error", "anchor"}

// syntaxError returns the 1-based line (0 when unknown) and the message of
// a yaml.v3 syntax error. yaml.v3 leaves the line out when it is the first
// one, and gives it 0-based for parser errors; this corrects both.
func syntaxError(err error) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	switch {
	case slices.Contains(parserProblems, msg):
		line++
	case line == 0 && !slices.ContainsFunc(unplacedProblems, func(s string) bool { return strings.Contains(msg, s) }):
		line = 1
	}
	return line, msg
}

// syntax records a YAML syntax error as one problem.
func (d *decoder) syntax(err error) {
	line, msg := syntaxError(err)
	d.add(Problem{Line: line, Msg: "invalid YAML: " + msg})
}

// suggest returns the known key closest to key when it is at most two edits
// away, or "".
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist && d < len(key) {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
