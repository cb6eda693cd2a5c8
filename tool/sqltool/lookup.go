package sqltool

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batchagent/batchagent/tool"
)

// DefaultLookupMaxRows is the default [LookupConfig.MaxRows].
const DefaultLookupMaxRows = 100

// maxBatchKeys is the most keys one lookup query binds; bigger batches run
// as several queries. SQLite allows 32766 parameters.
const maxBatchKeys = 1000

// batchHead is a batch query up to its VALUES rows. The batch's keys are a
// CTE whose name is no valid Table, so it cannot shadow the table; its index
// column routes each row to its call.
const batchHead = `WITH "lookup keys"(i, v) AS (VALUES `

// LookupConfig configures a keyed-lookup tool. DB, Table and Key are
// required; the rest of the zero value is valid.
type LookupConfig struct {
	// DB is the database queried. Required. The tool does not close it.
	DB *sql.DB
	// Table is the table looked up. Required; it must match
	// [A-Za-z_][A-Za-z0-9_]*, like Key and Columns, and is quoted in the
	// SQL.
	Table string
	// Key is the column matched against the key argument. Required.
	Key string
	// Columns are the columns returned. Empty means all (*).
	Columns []string
	// Name is the tool's name. Defaults to "sql_lookup".
	Name string
	// Description tells the model what the tool looks up. Defaults to a
	// sentence naming Table, Key and Columns.
	Description string
	// MaxRows is the most rows returned for one key. Defaults to
	// DefaultLookupMaxRows; negative is an error.
	MaxRows int
	// Timeout bounds each query. Defaults to DefaultTimeout; negative is
	// an error.
	Timeout time.Duration
	// Cacheable marks the tool cacheable ([tool.Spec.Cacheable]). Callers
	// usually set it: a lookup's result depends only on its key while the
	// table does not change.
	Cacheable bool
}

// NoRowError is the error of a lookup whose key matches no row. It wraps
// [sql.ErrNoRows].
type NoRowError struct {
	// Table and Key name the table and key column.
	Table, Key string
	// Value is the key looked up, as JSON.
	Value string
}

// Error returns "no row in TABLE with KEY = VALUE".
func (e *NoRowError) Error() string {
	return "no row in " + e.Table + " with " + e.Key + " = " + e.Value
}

// Unwrap returns sql.ErrNoRows.
func (e *NoRowError) Unwrap() error { return sql.ErrNoRows }

// lookup is the keyed-lookup tool.
type lookup struct {
	spec       tool.Spec
	db         *sql.DB
	table, key string // as configured, for messages
	one        string // the query for one key
	batchTail  string // the batch query after its VALUES rows
	maxRows    int
	timeout    time.Duration
	timeoutErr error
}

// Lookup returns a keyed-lookup tool (named sql_lookup unless Name says
// otherwise): its arguments are {"key": string or number}, and it returns
// the row of Table whose Key column equals key as a JSON object of Columns,
// in order (BLOBs as the string "<N bytes>", times as RFC 3339 strings), or
// a JSON array of such objects when several rows match. A key matching no
// row fails with a [*NoRowError]; malformed arguments fail with an error
// wrapping [tool.ErrBadArguments]. Keys compare as in SQL: the column's
// type affinity applies, so "42" finds the row with INTEGER key 42. More
// than MaxRows rows for one key are cut to MaxRows, and the line
// "[truncated: more than N rows]" follows the array.
//
// The tool is a [tool.Batcher]: Call runs SELECT … WHERE key = ?, and
// CallBatch answers a whole batch with one query (a join of the table with
// the batch's keys, bound as parameters; batches of more than 1000 keys take
// one query per 1000), giving each call its own result or error: a key
// with no row or a malformed argument fails that call only. A query still
// running after Timeout (each query of a batch has its own) is interrupted
// and fails every call it answers with an error wrapping [tool.ErrTimeout].
// The SQL quotes identifiers with double quotes and binds ? parameters, as
// SQLite does. The tool only reads but, unlike [Query], needs no read-only
// enforcement: it runs only the SQL it builds. It is safe for concurrent
// use.
//
// Lookup fails if DB is nil, Table, Key or a column is not a valid
// identifier, or MaxRows or Timeout is negative.
func Lookup(cfg LookupConfig) (tool.Tool, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sqltool: lookup: "+format, args...))
	}
	if cfg.DB == nil {
		bad("nil DB")
	}
	if !validIdent(cfg.Table) {
		bad("Table %q is not an identifier matching [A-Za-z_][A-Za-z0-9_]*", cfg.Table)
	}
	if !validIdent(cfg.Key) {
		bad("Key %q is not an identifier matching [A-Za-z_][A-Za-z0-9_]*", cfg.Key)
	}
	for i, c := range cfg.Columns {
		if !validIdent(c) {
			bad("Columns[%d] %q is not an identifier matching [A-Za-z_][A-Za-z0-9_]*", i, c)
		}
	}
	if cfg.MaxRows < 0 {
		bad("negative MaxRows %d", cfg.MaxRows)
	}
	if cfg.Timeout < 0 {
		bad("negative Timeout %v", cfg.Timeout)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "sql_lookup"
	}
	if cfg.MaxRows == 0 {
		cfg.MaxRows = DefaultLookupMaxRows
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	what := "all columns"
	// Columns are qualified: SQLite reads an unqualified "x" that names no
	// column as the string 'x', but t."x" as an error.
	cols := "t.*"
	if len(cfg.Columns) > 0 {
		what = "the columns " + strings.Join(cfg.Columns, ", ")
		qualified := make([]string, len(cfg.Columns))
		for i, c := range cfg.Columns {
			qualified[i] = "t." + quoteIdent(c)
		}
		cols = strings.Join(qualified, ", ")
	}
	if cfg.Description == "" {
		cfg.Description = fmt.Sprintf("Look up rows of the table %s by %s. "+
			"Returns the matching row as a JSON object with %s, "+
			"or a JSON array of objects when several rows match; it is an error when no row matches.",
			cfg.Table, cfg.Key, what)
	}
	table, key := quoteIdent(cfg.Table), quoteIdent(cfg.Key)
	return &lookup{
		spec: tool.Spec{
			Name:        cfg.Name,
			Description: cfg.Description,
			Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":["string","number"],` +
				`"description":` + string(appendJSONString(nil, "The "+cfg.Key+" to look up.")) + `}},` +
				`"required":["key"],"additionalProperties":false}`),
			Cacheable: cfg.Cacheable,
		},
		db:         cfg.DB,
		table:      cfg.Table,
		key:        cfg.Key,
		one:        "SELECT " + cols + " FROM " + table + " AS t WHERE t." + key + " = ?",
		batchTail:  `) SELECT "lookup keys".i, ` + cols + ` FROM "lookup keys" JOIN ` + table + ` AS t ON t.` + key + ` = "lookup keys".v ORDER BY "lookup keys".i`,
		maxRows:    cfg.MaxRows,
		timeout:    cfg.Timeout,
		timeoutErr: fmt.Errorf("%w: lookup ran past %v", tool.ErrTimeout, cfg.Timeout),
	}, nil
}

func (l *lookup) Spec() tool.Spec { return l.spec }

func (l *lookup) Call(ctx context.Context, args json.RawMessage) (string, error) {
	key, value, err := decodeKey(args)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, l.timeout, l.timeoutErr)
	defer cancel()
	rows, err := l.db.QueryContext(ctx, l.one, key)
	if err != nil {
		return "", l.queryError(ctx, err)
	}
	defer rows.Close()
	var objs []string
	err = l.scan(rows, false, func(_ int64, obj string) {
		objs = append(objs, obj)
	})
	if err != nil {
		return "", l.queryError(ctx, err)
	}
	return l.result(objs, value)
}

func (l *lookup) CallBatch(ctx context.Context, args []json.RawMessage) []tool.Result {
	results := make([]tool.Result, len(args))
	keys := make([]any, 0, len(args))
	values := make([]string, 0, len(args))
	items := make([]int, 0, len(args)) // items[j] is the args index of keys[j]
	for i, a := range args {
		key, value, err := decodeKey(a)
		if err != nil {
			results[i].Err = err
			continue
		}
		keys = append(keys, key)
		values = append(values, value)
		items = append(items, i)
	}
	for start := 0; start < len(keys); start += maxBatchKeys {
		end := min(start+maxBatchKeys, len(keys))
		objs, err := l.batch(ctx, keys[start:end])
		for j := start; j < end; j++ {
			r := &results[items[j]]
			if err != nil {
				r.Err = err
				continue
			}
			r.Content, r.Err = l.result(objs[j-start], values[j])
		}
	}
	return results
}

// batch looks keys up with one query, bounded by the tool's timeout, and
// returns each key's rows as JSON objects.
func (l *lookup) batch(ctx context.Context, keys []any) ([][]string, error) {
	var q strings.Builder
	// A row, "(i,?)" and a comma, takes at most 8 bytes below maxBatchKeys.
	q.Grow(len(batchHead) + 8*len(keys) + len(l.batchTail))
	q.WriteString(batchHead)
	var num [20]byte // an int64 in decimal
	for i := range keys {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('(')
		q.Write(strconv.AppendInt(num[:0], int64(i), 10))
		q.WriteString(",?)")
	}
	q.WriteString(l.batchTail)
	ctx, cancel := context.WithTimeoutCause(ctx, l.timeout, l.timeoutErr)
	defer cancel()
	rows, err := l.db.QueryContext(ctx, q.String(), keys...)
	if err != nil {
		return nil, l.queryError(ctx, err)
	}
	defer rows.Close()
	objs := make([][]string, len(keys))
	err = l.scan(rows, true, func(i int64, obj string) {
		if 0 <= i && i < int64(len(objs)) {
			objs[i] = append(objs[i], obj)
		}
	})
	if err != nil {
		return nil, l.queryError(ctx, err)
	}
	return objs, nil
}

// scan renders each row of rows as a JSON object and passes it to emit,
// with the key index in the first column when indexed is set (that column
// is left out of the object). Rows beyond maxRows+1 for one index are
// dropped: one more than the limit is kept to tell that there were more.
func (l *lookup) scan(rows *sql.Rows, indexed bool, emit func(i int64, obj string)) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	names := cols
	if indexed {
		names = cols[1:]
	}
	keys := make([][]byte, len(names)) // "name":
	for i, n := range names {
		keys[i] = append(appendJSONString(nil, n), ':')
	}
	counts := make(map[int64]int)
	var b []byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		row := vals
		var idx int64
		if indexed {
			idx, _ = row[0].(int64)
			row = row[1:]
		}
		if counts[idx] > l.maxRows {
			continue
		}
		counts[idx]++
		b = append(b[:0], '{')
		for i, v := range row {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, keys[i]...)
			b = appendValue(b, v, true, false)
		}
		b = append(b, '}')
		emit(idx, string(b))
	}
	return rows.Err()
}

// result is the tool result for one key's rows, value being the key as
// JSON.
func (l *lookup) result(objs []string, value string) (string, error) {
	switch len(objs) {
	case 0:
		return "", &NoRowError{Table: l.table, Key: l.key, Value: value}
	case 1:
		return objs[0], nil
	}
	out := "[" + strings.Join(objs[:min(len(objs), l.maxRows)], ",") + "]"
	if len(objs) > l.maxRows {
		out += fmt.Sprintf("\n[truncated: more than %d rows]", l.maxRows)
	}
	return out, nil
}

// queryError returns err, or the timeout error if the query ran out of
// time.
func (l *lookup) queryError(ctx context.Context, err error) error {
	if context.Cause(ctx) == l.timeoutErr {
		return l.timeoutErr
	}
	return err
}

// decodeKey decodes {"key": string or number} and returns the key as a
// query parameter and as JSON.
func decodeKey(args json.RawMessage) (key any, value string, err error) {
	var a struct {
		Key json.RawMessage `json:"key"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, "", fmt.Errorf(`%w: %v; want {"key": <string or number>}`, tool.ErrBadArguments, err)
	}
	if a.Key == nil {
		return nil, "", fmt.Errorf(`%w: missing required argument "key"`, tool.ErrBadArguments)
	}
	d := json.NewDecoder(bytes.NewReader(a.Key))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, "", fmt.Errorf("%w: key: %v", tool.ErrBadArguments, err)
	}
	switch v.(type) {
	case string, json.Number:
	case nil:
		return nil, "", fmt.Errorf(`%w: "key" must be a string or a number, not null`, tool.ErrBadArguments)
	case bool:
		return nil, "", fmt.Errorf(`%w: "key" must be a string or a number, not a boolean`, tool.ErrBadArguments)
	case []any:
		return nil, "", fmt.Errorf(`%w: "key" must be a string or a number, not an array`, tool.ErrBadArguments)
	default:
		return nil, "", fmt.Errorf(`%w: "key" must be a string or a number, not an object`, tool.ErrBadArguments)
	}
	key, err = scalar(v)
	if err != nil {
		return nil, "", fmt.Errorf("%w: key: %v", tool.ErrBadArguments, err)
	}
	return key, string(a.Key), nil
}

// validIdent reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func validIdent(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_') {
			return false
		}
	}
	return true
}

// quoteIdent quotes an identifier that validIdent accepts.
func quoteIdent(s string) string { return `"` + s + `"` }
