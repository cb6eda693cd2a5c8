// Package job holds what a batch job is made of: the task template that is
// rendered once per input row, and the sources of those rows.
//
// # Templates
//
// [ParseTemplate] parses text with {field} placeholders into an immutable
// [Template]. {user.name} reaches into nested objects and {tags.0} into
// arrays; "{{" and "}}" are literal braces. [Template.Render] fills the
// placeholders from an [Input]: strings go in as they are, numbers as decimal
// text, objects and arrays as compact JSON. A missing field is a
// *[MissingFieldError], so a bad row fails alone. [Template.MissingFields]
// compares a template's fields with what an input source provides (the
// names [CSVHeader] reads, the keys of a first row), so that a misspelt
// placeholder is found before any row is rendered.
//
// # Inputs
//
// Rows come from a Go slice ([Slice]) or, lazily, from a reader: [JSONL] for
// JSON Lines and [CSV] for CSV with a header row. All three have the shape
// iter.Seq2[Input, error], so callers consume them the same way:
//
//	for in, err := range job.JSONL(f, "inputs.jsonl") {
//		if err != nil {
//			// One bad row: err is a *job.InputError naming the line.
//			continue
//		}
//		prompt, err := tmpl.Render(in)
//		...
//	}
//
// Files are read as the loop runs and never held whole. A row that cannot be
// decoded yields an *[InputError] with the file name and line in place of
// the row, and reading goes on; a failure of the reader itself ends the
// sequence. The package never opens files: callers pass readers in and close
// them.
//
// JSONL lines are read with the jsontext package of
// github.com/go-json-experiment/json, which refuses what encoding/json would
// silently drop or replace: a repeated key ([ErrDuplicateKey]) and text that
// is not UTF-8 ([ErrInvalidUTF8]). CSV fields are checked for UTF-8 too.
// Apart from that package, job imports only the standard library.
package job
