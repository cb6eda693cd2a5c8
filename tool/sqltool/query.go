package sqltool

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batchagent/batchagent/tool"
)

// Defaults for [QueryConfig] and [LookupConfig].
const (
	// DefaultMaxRows is the default [QueryConfig.MaxRows].
	DefaultMaxRows = 200
	// DefaultTimeout is the default [QueryConfig.Timeout] and
	// [LookupConfig.Timeout].
	DefaultTimeout = 5 * time.Second
)

// Dialects for [QueryConfig.Dialect].
const (
	// DialectSQLite is for SQLite databases: statements are checked with
	// SQLite's lexical rules and run with PRAGMA query_only=ON.
	DialectSQLite = "sqlite"
	// DialectGeneric is for other databases: statements are checked with a
	// stricter lexer, and writes are stopped only by the check and by the
	// database's read-only transaction, so the driver must support and
	// enforce sql.TxOptions{ReadOnly: true} (the SQLite driver accepts but
	// does not enforce it). Connecting as a role that may only read is
	// the sure way: a SELECT can still call functions with side effects.
	DialectGeneric = "generic"
)

// restoreTimeout bounds resetting PRAGMA query_only after a query.
const restoreTimeout = time.Second

// QueryConfig configures the sql_query tool. DB is required; the rest of the
// zero value is valid.
type QueryConfig struct {
	// DB is the database queried. Required. The tool does not close it.
	DB *sql.DB
	// Dialect says how read-only is enforced beyond the statement check:
	// DialectSQLite or DialectGeneric. Defaults to DialectSQLite.
	Dialect string
	// MaxRows is the most rows a result shows; a result with more ends
	// with the line "[truncated: more than N rows]". Defaults to
	// DefaultMaxRows; negative is an error.
	MaxRows int
	// Timeout bounds each query. Defaults to DefaultTimeout; negative is
	// an error.
	Timeout time.Duration
	// Cacheable marks the tool cacheable ([tool.Spec.Cacheable]): set it
	// when the data does not change while a job runs.
	Cacheable bool
}

// query is the sql_query tool.
type query struct {
	spec       tool.Spec
	db         *sql.DB
	generic    bool
	maxRows    int
	timeout    time.Duration
	timeoutErr error
}

// Query returns the sql_query tool, which runs one read-only SQL query and
// returns its rows. Its arguments are {"sql": string, "args": [values...]}:
// args, optional, are JSON scalars bound to the query's ? parameters in
// order (numbers without a fraction or exponent bind as integers). It is
// safe for concurrent use.
//
// Read-only is enforced three ways:
//  1. The statement must be one SELECT, WITH … SELECT or EXPLAIN [QUERY
//     PLAN] statement, optionally followed by ';'. A small tokenizer that
//     knows strings, quoted identifiers and comments reads it, so a keyword
//     in a string, or a second statement after a comment, is seen for what
//     it is. INSERT, UPDATE, DELETE, DROP, CREATE, ALTER, ATTACH, DETACH,
//     PRAGMA, VACUUM, REINDEX and every other statement are refused, as are
//     several statements, a WITH whose body modifies data (WITH … INSERT)
//     and SELECT … INTO. The error wraps [ErrNotReadOnly] and names the
//     statement kind; the query does not run.
//  2. The query runs in a transaction begun with sql.TxOptions{ReadOnly:
//     true}, which databases such as PostgreSQL enforce. The SQLite driver
//     accepts the option but does not enforce it; hence:
//  3. With DialectSQLite, the connection runs the query with PRAGMA
//     query_only=ON, under which SQLite refuses every write; the pragma is
//     set back afterwards if it was off, so DB may be shared with writers.
//     Opening the database with [OpenSQLite] and readOnly set adds SQLite's
//     mode=ro.
//
// The result is a header line of column names followed by one line per row,
// values separated by tabs. Values are JSON scalars: strings quoted (with
// tabs and newlines escaped), NULL as null, times as RFC 3339 strings; a
// BLOB shows as <N bytes>. A column name is quoted as a JSON string only if
// it holds a control character or starts with '"'. After MaxRows rows the
// line "[truncated: more than MaxRows rows]" ends the result. A query still
// running after Timeout is interrupted and fails with an error wrapping
// [tool.ErrTimeout]. Malformed arguments fail with an error wrapping
// [tool.ErrBadArguments]; errors of the database go back as they are.
//
// Query fails if DB is nil, Dialect is unknown, or MaxRows or Timeout is
// negative.
func Query(cfg QueryConfig) (tool.Tool, error) {
	var errs []error
	if cfg.DB == nil {
		errs = append(errs, errors.New("sqltool: sql_query: nil DB"))
	}
	switch cfg.Dialect {
	case "", DialectSQLite, DialectGeneric:
	default:
		errs = append(errs, fmt.Errorf("sqltool: sql_query: unknown Dialect %q, want %q or %q", cfg.Dialect, DialectSQLite, DialectGeneric))
	}
	if cfg.MaxRows < 0 {
		errs = append(errs, fmt.Errorf("sqltool: sql_query: negative MaxRows %d", cfg.MaxRows))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("sqltool: sql_query: negative Timeout %v", cfg.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.MaxRows == 0 {
		cfg.MaxRows = DefaultMaxRows
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &query{
		spec: tool.Spec{
			Name: "sql_query",
			Description: fmt.Sprintf("Run one read-only SQL query (SELECT, WITH … SELECT or EXPLAIN) and return its rows: "+
				"a header line of column names, then one line per row with tab-separated JSON values. "+
				"Write statements, PRAGMA, ATTACH and multiple statements are refused. "+
				"At most %d rows are shown and a query may run for %v; aggregate or add WHERE and LIMIT for big tables. "+
				"Pass values as \"args\" bound to ? placeholders rather than quoting them into the SQL.",
				cfg.MaxRows, cfg.Timeout),
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"sql":{"type":"string","description":"One SELECT, WITH … SELECT or EXPLAIN statement, for example \"SELECT name FROM users WHERE id = ?\"."},` +
				`"args":{"type":"array","items":{"type":["string","number","boolean","null"]},"description":"Values for the ? placeholders, in order."}},` +
				`"required":["sql"],"additionalProperties":false}`),
			Cacheable: cfg.Cacheable,
		},
		db:         cfg.DB,
		generic:    cfg.Dialect == DialectGeneric,
		maxRows:    cfg.MaxRows,
		timeout:    cfg.Timeout,
		timeoutErr: fmt.Errorf("%w: query ran past %v; aggregate, filter or add LIMIT", tool.ErrTimeout, cfg.Timeout),
	}, nil
}

func (q *query) Spec() tool.Spec { return q.spec }

func (q *query) Call(ctx context.Context, args json.RawMessage) (string, error) {
	stmt, params, err := decodeQueryArgs(args)
	if err != nil {
		return "", err
	}
	if err := checkStatement(stmt, q.generic); err != nil {
		return "", err
	}
	return q.run(ctx, stmt, params)
}

// run runs stmt, already checked, in a read-only transaction and formats
// its rows.
func (q *query) run(ctx context.Context, stmt string, params []any) (string, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, q.timeout, q.timeoutErr)
	defer cancel()
	out, err := q.runReadOnly(ctx, stmt, params)
	if err != nil && context.Cause(ctx) == q.timeoutErr {
		return "", q.timeoutErr
	}
	return out, err
}

func (q *query) runReadOnly(ctx context.Context, stmt string, params []any) (_ string, err error) {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if !q.generic {
		restore, err := queryOnly(ctx, conn)
		if err != nil {
			return "", err
		}
		defer restore()
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", fmt.Errorf("begin read-only transaction: %w", err)
	}
	defer tx.Rollback() // nothing to commit: the query only reads
	rows, err := tx.QueryContext(ctx, stmt, params...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	return q.format(rows)
}

// queryOnly turns PRAGMA query_only on for conn if it is off. The returned
// func turns it off again; if that fails, the connection is discarded
// rather than handed back to the pool in query-only state.
func queryOnly(ctx context.Context, conn *sql.Conn) (restore func(), err error) {
	var on bool
	if err := conn.QueryRowContext(ctx, "PRAGMA query_only").Scan(&on); err != nil {
		return nil, fmt.Errorf("read PRAGMA query_only: %w", err)
	}
	if on {
		return func() {}, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA query_only=ON"); err != nil {
		return nil, fmt.Errorf("set PRAGMA query_only: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "PRAGMA query_only=OFF"); err != nil {
			// Discard the connection. Raw reports driver.ErrBadConn back,
			// which is the point; there is nothing else to do with it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}, nil
}

// format renders rows as the tool's result.
func (q *query) format(rows *sql.Rows) (string, error) {
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var b []byte
	for i, c := range cols {
		if i > 0 {
			b = append(b, '\t')
		}
		b = appendColumnName(b, c)
	}
	b = append(b, '\n')
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if n == q.maxRows {
			b = fmt.Appendf(b, "[truncated: more than %d rows]\n", q.maxRows)
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		for i, v := range vals {
			if i > 0 {
				b = append(b, '\t')
			}
			b = appendValue(b, v, false, q.generic)
		}
		b = append(b, '\n')
		n++
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return string(b), nil
}

// appendColumnName appends a column name for the header line: as it is,
// unless it holds a control character or starts with '"', when it is a JSON
// string.
func appendColumnName(b []byte, name string) []byte {
	if strings.HasPrefix(name, `"`) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return appendJSONString(b, name)
	}
	return append(b, name...)
}

// decodeQueryArgs decodes {"sql": string, "args": [scalars]}.
func decodeQueryArgs(args json.RawMessage) (stmt string, params []any, err error) {
	var a struct {
		SQL  *string `json:"sql"`
		Args []any   `json:"args"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return "", nil, fmt.Errorf(`%w: %v; want {"sql": "<query>", "args": [<values>]}`, tool.ErrBadArguments, err)
	}
	if a.SQL == nil {
		return "", nil, fmt.Errorf(`%w: missing required argument "sql"`, tool.ErrBadArguments)
	}
	params = make([]any, len(a.Args))
	for i, v := range a.Args {
		p, err := scalar(v)
		if err != nil {
			return "", nil, fmt.Errorf("%w: args[%d]: %v", tool.ErrBadArguments, i, err)
		}
		params[i] = p
	}
	return *a.SQL, params, nil
}

// scalar converts a JSON value decoded with UseNumber to a query parameter:
// numbers without a fraction or exponent that fit an int64 become int64,
// other numbers float64.
func scalar(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool:
		return v, nil
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", v)
		}
		return f, nil
	}
	return nil, errors.New("must be a string, number, boolean or null")
}
