// Package input reads the rows of a batch job from a Go slice ([Slice]) or,
// lazily, from a reader: [JSONL] for JSON Lines and [CSV] for CSV with a
// header row. All three have the shape iter.Seq2[job.Input, error], so
// callers consume them the same way:
//
//	for in, err := range input.JSONL(f, "inputs.jsonl") {
//		if err != nil {
//			// One bad row: err is an *input.Error naming the line.
//			continue
//		}
//		prompt, err := tmpl.Render(in)
//		...
//	}
//
// Files are read as the loop runs and never held whole. A row that cannot be
// decoded yields an *[Error] with the file name and line in place of the
// row, and reading goes on; a failure of the reader itself ends the
// sequence. The package never opens files: callers pass readers in and close
// them.
//
// # Rows
//
// What counts as a row is decided in one place per format and shared by
// every function here. In JSON Lines, a UTF-8 byte order mark at the start
// is not content, a line of spaces, tabs and carriage returns only holds no
// row, and every other line is one row, valid or not. In CSV, a byte order
// mark at the start is skipped, the first record is the header, empty lines
// hold no record, and every record after the header is one row, valid or
// not; a quoted field may span lines. So [CountJSONL] and [CountCSV], which
// count the items of an input without decoding it (to size a progress bar,
// or to check a resumed run's state), give the number of items that
// [JSONL] and [CSV] yield, [LineJSONL] and [LineCSV] the line of each
// (to point at an input in a message), and [CSVHeader] and [JSONLFields],
// which peek at the fields an input provides (to check a template's
// placeholders before any row is rendered), read them as the readers do.
//
// # Strict decoding
//
// JSONL lines are read with the jsontext package of
// github.com/go-json-experiment/json, which refuses what encoding/json would
// silently drop or replace: a repeated key ([ErrDuplicateKey]) and text that
// is not UTF-8 ([ErrInvalidUTF8]). CSV fields are checked for UTF-8 too.
// Apart from that package and package job, input imports only the standard
// library.
package input
