package outfile

import (
	"bufio"
	"encoding/csv"
	"io"
	"iter"
	"strconv"
)

// writeCSV writes rows to w as CSV (RFC 4180, encoding/csv's quoting):
// a header row, then one record per row. An output value is a string's
// text, a number or boolean as JSON writes it, or compact JSON; a missing
// or null one is an empty cell, as is the cost of a result without one.
func writeCSV(w io.Writer, cols []Column, rows iter.Seq2[*tableLine, error]) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	if err := cw.Write(header(cols)); err != nil {
		return err
	}
	rec := make([]string, 0, len(cols)+len(fixedColumns))
	for l, err := range rows {
		if err != nil {
			return err
		}
		rec = append(rec[:0], strconv.Itoa(l.Index))
		obj := outputObject(l.Output, cols)
		for _, c := range cols {
			v, ok := cell(l.Output, c, obj)
			if !ok {
				rec = append(rec, "")
				continue
			}
			rec = append(rec, text(v))
		}
		kind, msg := "", ""
		if l.Error != nil {
			kind, msg = l.Error.Kind, l.Error.Message
		}
		rec = append(rec, kind, msg, strconv.Itoa(l.Turns),
			strconv.FormatInt(l.Usage.PromptTokens, 10), strconv.FormatInt(l.Usage.CompletionTokens, 10),
			formatCost(l.Cost))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}
