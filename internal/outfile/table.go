package outfile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Format is the format of a results file, chosen by its extension
// ([FormatOf]).
type Format int

const (
	JSONL   Format = iota // one JSON object per result and line: any extension but those below
	CSV                   // .csv: a header row, then one record per result (RFC 4180)
	Parquet               // .parquet: one row per result, typed columns
)

// String returns the format's name: "jsonl", "csv" or "parquet".
func (f Format) String() string {
	switch f {
	case CSV:
		return "csv"
	case Parquet:
		return "parquet"
	}
	return "jsonl"
}

// FormatOf returns the format of the results file at path by its extension,
// in any case: .csv is [CSV], .parquet [Parquet], anything else [JSONL].
func FormatOf(path string) Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return CSV
	case ".parquet":
		return Parquet
	}
	return JSONL
}

// JournalPath returns the journal of the table output at path (see
// [OpenTable]): path + ".partial.jsonl".
func JournalPath(path string) string { return path + ".partial.jsonl" }

// Column types of a table output, from the output schema's "type".
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeJSON    = "json" // anything else (objects, arrays, several types): compact JSON text
)

// Column is one column of a table output taken from the output: the
// output's top-level property Property, written under Name with Type.
type Column struct {
	Name     string // the column's name: Property, or "output." + Property where it is a fixed column's name
	Property string // the output's top-level property; "" for the whole output (a job without an object schema)
	Type     string // TypeString, TypeInteger, TypeNumber, TypeBoolean or TypeJSON
}

// fixedColumns are the columns every table output has besides the
// output's: index first, the others last.
var fixedColumns = []string{"index", "error_kind", "error_message", "turns", "prompt_tokens", "completion_tokens", "cost"}

// Columns returns the output columns of a table output for the output
// schema outputSchema: one per top-level property of an object schema, in
// the order the schema declares them, typed by the property's "type" (a
// single type, or one type and "null"; otherwise [TypeJSON]). A job with no
// schema, or a schema that is not an object with properties, has one
// column "output": the text where the output is a JSON string, else its
// compact JSON. An error says where the schema does not parse.
func Columns(outputSchema json.RawMessage) ([]Column, error) {
	whole := []Column{{Name: "output", Type: TypeString}}
	if len(bytes.TrimSpace(outputSchema)) == 0 {
		return whole, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(outputSchema, &top); err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	props, ok := top["properties"]
	if !ok {
		return whole, nil
	}
	names, err := objectKeys(props)
	if err != nil {
		return nil, fmt.Errorf("output schema: properties: %w", err)
	}
	if len(names) == 0 {
		return whole, nil
	}
	var defs map[string]struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(props, &defs); err != nil {
		return nil, fmt.Errorf("output schema: properties: %w", err)
	}
	cols := make([]Column, 0, len(names))
	for _, p := range names {
		name := p
		if slices.Contains(fixedColumns, p) {
			name = "output." + p
		}
		cols = append(cols, Column{Name: name, Property: p, Type: typeOf(defs[p].Type)})
	}
	return cols, nil
}

// objectKeys returns the keys of the JSON object b in the order they
// appear, once each.
func objectKeys(b []byte) ([]string, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// typeOf maps a JSON Schema "type" to a column type.
func typeOf(t json.RawMessage) string {
	var one string
	if json.Unmarshal(t, &one) != nil {
		var many []string
		if json.Unmarshal(t, &many) != nil {
			return TypeJSON
		}
		many = slices.DeleteFunc(many, func(s string) bool { return s == "null" })
		if len(many) != 1 {
			return TypeJSON
		}
		one = many[0]
	}
	switch one {
	case TypeString, TypeInteger, TypeNumber, TypeBoolean:
		return one
	}
	return TypeJSON
}

// Table is a results file in a table format ([CSV] or [Parquet]), written
// through a journal. Results are written, as result lines, to the journal
// JOURNAL = [JournalPath](path), which is opened, reconciled on resume and
// trimmed exactly as a JSONL output is ([Open]); Close then writes the
// table at path from the journal, in index order, to a temporary file
// beside it that is renamed over path. So a kill at any moment leaves the
// table either as the last Close wrote it or untouched, never torn, and
// the journal with at most a torn last line, which the next resume cuts
// off; the resumed run's Close writes the table again from the whole
// journal, so no row is lost, duplicated or stale. Parquet needs this
// (its footer is written last, so a file cannot be appended to after a
// crash); CSV shares it so that both keep the same guarantees and the
// same input order. When the journal holds a result for every input,
// Close removes it: a later resume restores the results from the state
// file.
//
// A Table is an io.Writer of result lines for [NewWriter]; it is not safe
// for concurrent use (the Writer serialises its writes).
type Table struct {
	f      *os.File
	path   string
	format Format
	cols   []Column
	inputs int // the number of inputs, 0 if unknown: Close removes a complete journal
}

// OpenTable opens the table output at path in format (CSV or Parquet)
// with the output columns cols, for a run over inputs inputs (0 if
// unknown). Its journal is opened as [Open] opens a JSONL output with
// plan, and the indexes it keeps are returned for [Writer.Skip]. The
// caller closes the table, which writes it.
func OpenTable(path string, format Format, cols []Column, plan *Plan, inputs int) (*Table, map[int]bool, error) {
	if format != CSV && format != Parquet {
		return nil, nil, fmt.Errorf("%s: not a table format: %v", path, format)
	}
	f, kept, err := Open(JournalPath(path), plan)
	if err != nil {
		return nil, nil, err
	}
	return &Table{f: f, path: path, format: format, cols: cols, inputs: inputs}, kept, nil
}

// Write appends result lines to the journal.
func (t *Table) Write(p []byte) (int, error) { return t.f.Write(p) }

// Close closes the journal and writes the table from it (see [Table]).
// It returns the first error met; the journal is kept unless the table
// was written and holds every input.
func (t *Table) Close() error {
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("%s: %w", t.f.Name(), err)
	}
	n, err := WriteTable(t.path, t.format, t.cols, t.f.Name())
	if err != nil {
		return err
	}
	if t.inputs > 0 && n == t.inputs {
		if err := os.Remove(t.f.Name()); err != nil {
			return err
		}
	}
	return nil
}

// tableLine is what a table row takes from a result line.
type tableLine struct {
	Index  int             `json:"index"`
	Output json.RawMessage `json:"output"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	Turns int `json:"turns"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Cost *float64 `json:"cost"`
}

// journalEntry locates one result line of a journal.
type journalEntry struct {
	index int
	off   int64
	n     int
}

// WriteTable writes the table at path in format (CSV or Parquet), with the
// output columns cols, from the result lines of the JSONL file journal:
// one row per index, in index order (the last line of an index wins; a
// torn last line is left out), written to a temporary file beside path
// and renamed over it. It returns the number of rows written.
func WriteTable(path string, format Format, cols []Column, journal string) (int, error) {
	jf, err := os.Open(journal)
	if err != nil {
		return 0, err
	}
	defer jf.Close()
	entries, err := scanJournal(jf)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", journal, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // renamed over path unless something failed
	defer tmp.Close()
	rows := func(yield func(*tableLine, error) bool) {
		var buf []byte
		for _, e := range entries {
			buf = slices.Grow(buf[:0], e.n)[:e.n]
			if _, err := jf.ReadAt(buf, e.off); err != nil {
				yield(nil, fmt.Errorf("%s: %w", journal, err))
				return
			}
			var l tableLine
			if err := json.Unmarshal(buf, &l); err != nil {
				yield(nil, fmt.Errorf("%s: result %d: %w", journal, e.index, err))
				return
			}
			if !yield(&l, nil) {
				return
			}
		}
	}
	switch format {
	case CSV:
		err = writeCSV(tmp, cols, rows)
	case Parquet:
		err = writeParquet(tmp, cols, rows)
	default:
		err = fmt.Errorf("not a table format: %v", format)
	}
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes 0600; a JSONL output is 0644 under the usual umask
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return len(entries), nil
}

// scanJournal returns where the result lines of r are, one per index (the
// last), sorted by index. A last line without its newline is torn and left
// out; so is a line that is not a result.
func scanJournal(r io.Reader) ([]journalEntry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	at := map[int]int{} // index → position in entries
	var entries []journalEntry
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: read the rest of it.
			full := slices.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		var v struct {
			Index *int `json:"index"`
		}
		if json.Unmarshal(line, &v) == nil && v.Index != nil && *v.Index >= 0 {
			e := journalEntry{*v.Index, off, len(line)}
			if i, ok := at[e.index]; ok {
				entries[i] = e
			} else {
				at[e.index] = len(entries)
				entries = append(entries, e)
			}
		}
		off += int64(len(line))
	}
	slices.SortFunc(entries, func(a, b journalEntry) int { return cmp.Compare(a.index, b.index) })
	return entries, nil
}

// header returns the names of the columns of a table with output columns
// cols.
func header(cols []Column) []string {
	h := []string{fixedColumns[0]}
	for _, c := range cols {
		h = append(h, c.Name)
	}
	return append(h, fixedColumns[1:]...)
}

// cell returns the output value of column c in the result's output out:
// the raw JSON and whether it is there (not missing, not null).
func cell(out json.RawMessage, c Column, obj map[string]json.RawMessage) (json.RawMessage, bool) {
	v := out
	if c.Property != "" {
		v = obj[c.Property]
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// outputObject returns the top-level members of out where cols take
// properties from it and it is an object, else nil.
func outputObject(out json.RawMessage, cols []Column) map[string]json.RawMessage {
	if len(cols) == 0 || cols[0].Property == "" || len(out) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(out, &obj) != nil {
		return nil
	}
	return obj
}

// text returns the cell text of the JSON value v: a string's text, else v
// compacted (numbers as written, booleans as true and false).
func text(v json.RawMessage) string {
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

// formatCost returns the cell text of a cost.
func formatCost(c *float64) string {
	if c == nil {
		return ""
	}
	return strconv.FormatFloat(*c, 'g', -1, 64)
}
