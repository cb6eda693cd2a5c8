package outfile

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// rowGroupRows bounds the rows of one Parquet row group, and so what the
// writer holds in memory.
const rowGroupRows = 64 << 10

// orderedGroup is a Parquet group whose fields keep the order given
// (parquet.Group sorts them by name): index first, as in the CSV.
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

// Fields returns the group's fields in their order.
func (g orderedGroup) Fields() []parquet.Field { return g.fields }

// parquetSchema returns the schema of a Parquet table with output columns
// cols: every column optional; index, turns and token counts int64, cost
// double, error kind and message strings, the output's columns by their
// type (integer int64, number double, boolean, string; JSON as a string
// holding compact JSON).
func parquetSchema(cols []Column) *parquet.Schema {
	names := header(cols)
	nodes := map[string]parquet.Node{
		"index": parquet.Int(64), "error_kind": parquet.String(), "error_message": parquet.String(),
		"turns": parquet.Int(64), "prompt_tokens": parquet.Int(64), "completion_tokens": parquet.Int(64),
		"cost": parquet.Leaf(parquet.DoubleType),
	}
	for _, c := range cols {
		nodes[c.Name] = leafOf(c.Type)
	}
	g := orderedGroup{Group: parquet.Group{}}
	for _, n := range names {
		node := parquet.Optional(nodes[n])
		if n == "index" {
			node = nodes[n]
		}
		g.Group[n] = node
		g.fields = append(g.fields, parquet.Group{n: node}.Fields()[0])
	}
	return parquet.NewSchema("result", g)
}

// leafOf returns the Parquet leaf of a column type.
func leafOf(typ string) parquet.Node {
	switch typ {
	case TypeInteger:
		return parquet.Int(64)
	case TypeNumber:
		return parquet.Leaf(parquet.DoubleType)
	case TypeBoolean:
		return parquet.Leaf(parquet.BooleanType)
	}
	// JSON too: a string column holding JSON text, which every reader
	// shows as text (Arrow reads the JSON logical type as bytes).
	return parquet.String()
}

// writeParquet writes rows to w as a Parquet file with the schema of
// parquetSchema(cols). An output value that does not have its column's
// type (a schema that allows more than its "type" says) is null.
func writeParquet(w io.Writer, cols []Column, rows iter.Seq2[*tableLine, error]) error {
	schema := parquetSchema(cols)
	pw := parquet.NewWriter(w, schema, parquet.MaxRowsPerRowGroup(rowGroupRows), parquet.Compression(&parquet.Zstd))
	row := make(parquet.Row, 0, len(cols)+len(fixedColumns))
	for l, err := range rows {
		if err != nil {
			return err
		}
		row = append(row[:0], parquet.Int64Value(int64(l.Index)).Level(0, 0, 0))
		col := 1
		add := func(v parquet.Value, ok bool) {
			if ok {
				row = append(row, v.Level(0, 1, col))
			} else {
				row = append(row, parquet.NullValue().Level(0, 0, col))
			}
			col++
		}
		obj := outputObject(l.Output, cols)
		for _, c := range cols {
			v, ok := cell(l.Output, c, obj)
			if !ok {
				add(parquet.Value{}, false)
				continue
			}
			add(valueOf(c.Type, v))
		}
		kind, msg := "", ""
		if l.Error != nil {
			kind, msg = l.Error.Kind, l.Error.Message
		}
		add(parquet.ByteArrayValue([]byte(kind)), l.Error != nil)
		add(parquet.ByteArrayValue([]byte(msg)), l.Error != nil)
		add(parquet.Int64Value(int64(l.Turns)), true)
		add(parquet.Int64Value(l.Usage.PromptTokens), true)
		add(parquet.Int64Value(l.Usage.CompletionTokens), true)
		if l.Cost != nil {
			add(parquet.DoubleValue(*l.Cost), true)
		} else {
			add(parquet.Value{}, false)
		}
		if _, err := pw.WriteRows([]parquet.Row{row}); err != nil {
			return fmt.Errorf("parquet: row %d: %w", l.Index, err)
		}
	}
	return pw.Close()
}

// valueOf returns the Parquet value of the JSON value v in a column of
// type typ, and false where v does not have that type.
func valueOf(typ string, v json.RawMessage) (parquet.Value, bool) {
	switch typ {
	case TypeInteger:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return parquet.Int64Value(i), true
		}
		// JSON Schema's integer allows 3.0.
		if f, err := strconv.ParseFloat(string(v), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return parquet.Int64Value(int64(f)), true
		}
		return parquet.Value{}, false
	case TypeNumber:
		f, err := strconv.ParseFloat(string(v), 64)
		return parquet.DoubleValue(f), err == nil
	case TypeBoolean:
		var b bool
		err := json.Unmarshal(v, &b)
		return parquet.BooleanValue(b), err == nil
	case TypeString:
		var s string
		if json.Unmarshal(v, &s) == nil {
			return parquet.ByteArrayValue([]byte(s)), true
		}
	}
	return parquet.ByteArrayValue([]byte(text(v))), true
}
