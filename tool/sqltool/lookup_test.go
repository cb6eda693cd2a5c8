package sqltool_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/sqltool"
)

// newLookup returns the lookup tool for cfg as a Batcher, failing the test on
// error.
func newLookup(t testing.TB, cfg sqltool.LookupConfig) tool.Batcher {
	t.Helper()
	l, err := sqltool.Lookup(cfg)
	if err != nil {
		t.Fatalf("Lookup(%+v) = %v", cfg, err)
	}
	b, ok := l.(tool.Batcher)
	if !ok {
		t.Fatalf("Lookup(%+v) = %T, want a tool.Batcher", cfg, l)
	}
	return b
}

// result is a Result with the error as text, for comparisons.
type result struct {
	Content string
	Err     string
}

func results(rs []tool.Result) []result {
	out := make([]result, len(rs))
	for i, r := range rs {
		out[i].Content = r.Content
		if r.Err != nil {
			out[i].Err = r.Err.Error()
		}
	}
	return out
}

func rawArgs(args ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(args))
	for i, a := range args {
		out[i] = json.RawMessage(a)
	}
	return out
}

const (
	ada = `{"id":1,"name":"Ada","team":"core","score":9.5,"avatar":"<2 bytes>","note":null}`
	bob = `{"id":2,"name":"Bob","team":"core","score":7,"avatar":null,"note":"likes\ttabs"}`
	cy  = `{"id":3,"name":"Cy","team":"web","score":null,"avatar":null,"note":"line1\nline2"}`
	dee = `{"id":4,"name":"Dee \"D\"","team":"web","score":-1.25,"avatar":"<0 bytes>","note":"ünï"}`
)

func TestLookupCall(t *testing.T) {
	_, db := newUsersDB(t)
	byID := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "id"})
	byTeam := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "team", Columns: []string{"name", "id"}, Name: "team_members"})
	tests := []struct {
		name    string
		tool    tool.Tool
		args    string
		want    string
		wantErr string
	}{
		{"integer key", byID, `{"key":1}`, ada, ""},
		{"key as text finds the integer key", byID, `{"key":"2"}`, bob, ""},
		{"key as float", byID, `{"key":3.0}`, cy, ""},
		{"unicode and quotes", byID, `{"key":4}`, dee, ""},
		{"missing key", byID, `{"key":99}`, "", "no row in users with id = 99"},
		{"missing text key", byID, `{"key":"x\"y"}`, "", `no row in users with id = "x\"y"`},
		{"several rows", byTeam, `{"key":"core"}`, `[{"name":"Ada","id":1},{"name":"Bob","id":2}]`, ""},
		{"no rows for a text key", byTeam, `{"key":"ops"}`, "", `no row in users with team = "ops"`},
		{"null key", byID, `{"key":null}`, "", `tool: bad arguments: "key" must be a string or a number, not null`},
		{"boolean key", byID, `{"key":true}`, "", `tool: bad arguments: "key" must be a string or a number, not a boolean`},
		{"object key", byID, `{"key":{"id":1}}`, "", `tool: bad arguments: "key" must be a string or a number, not an object`},
		{"array key", byID, `{"key":[1]}`, "", `tool: bad arguments: "key" must be a string or a number, not an array`},
		{"no key", byID, `{}`, "", `tool: bad arguments: missing required argument "key"`},
		{"unknown field", byID, `{"key":1,"table":"x"}`, "", `tool: bad arguments: json: unknown field "table"; want {"key": <string or number>}`},
		{"not an object", byID, `1`, "", "tool: bad arguments: json: cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.tool.Call(t.Context(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("Call(%s) = %q, %v, want error %q", tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Call(%s) = %q, %v, want %q, nil", tt.args, got, err, tt.want)
			}
			var v any
			if err := json.Unmarshal([]byte(got), &v); err != nil {
				t.Errorf("Call(%s) = %q, not JSON: %v", tt.args, got, err)
			}
		})
	}
	_, err := byID.Call(t.Context(), json.RawMessage(`{"key":99}`))
	var nre *sqltool.NoRowError
	if !errors.As(err, &nre) || !errors.Is(err, sql.ErrNoRows) || *nre != (sqltool.NoRowError{Table: "users", Key: "id", Value: "99"}) {
		t.Errorf("Call(missing) = %#v, want a *NoRowError wrapping sql.ErrNoRows", err)
	}
	_, err = byID.Call(t.Context(), json.RawMessage(`{"key":null}`))
	if !errors.Is(err, tool.ErrBadArguments) {
		t.Errorf("Call(null) = %v, want an error wrapping tool.ErrBadArguments", err)
	}
}

func TestLookupCallBatch(t *testing.T) {
	_, db := newUsersDB(t)
	byID := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "id"})
	byTeam := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "team", Columns: []string{"id"}})
	tests := []struct {
		name string
		tool tool.Batcher
		args []json.RawMessage
		want []result
	}{
		{
			name: "each call its own row or error",
			tool: byID,
			args: rawArgs(`{"key":3}`, `{"key":99}`, `{"key":"1"}`, `{"key":{}}`, `{"nokey":1}`, `{"key":4}`),
			want: []result{
				{Content: cy},
				{Err: "no row in users with id = 99"},
				{Content: ada},
				{Err: `tool: bad arguments: "key" must be a string or a number, not an object`},
				{Err: `tool: bad arguments: json: unknown field "nokey"; want {"key": <string or number>}`},
				{Content: dee},
			},
		},
		{
			name: "keys equal in SQL",
			tool: byID,
			args: rawArgs(`{"key":2}`, `{"key":"2"}`, `{"key":2.0}`),
			want: []result{{Content: bob}, {Content: bob}, {Content: bob}},
		},
		{
			name: "duplicate calls",
			tool: byID,
			args: rawArgs(`{"key":1}`, `{"key":1}`),
			want: []result{{Content: ada}, {Content: ada}},
		},
		{
			name: "non-unique keys",
			tool: byTeam,
			args: rawArgs(`{"key":"web"}`, `{"key":"ops"}`, `{"key":"core"}`),
			want: []result{
				{Content: `[{"id":3},{"id":4}]`},
				{Err: `no row in users with team = "ops"`},
				{Content: `[{"id":1},{"id":2}]`},
			},
		},
		{
			name: "only bad arguments",
			tool: byID,
			args: rawArgs(`{"key":true}`),
			want: []result{{Err: `tool: bad arguments: "key" must be a string or a number, not a boolean`}},
		},
		{
			name: "empty batch",
			tool: byID,
			args: nil,
			want: []result{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := results(tt.tool.CallBatch(t.Context(), tt.args))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CallBatch(%s) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// TestLookupBigBatch looks up more keys than one query binds.
func TestLookupBigBatch(t *testing.T) {
	_, db := newUsersDB(t)
	if _, err := db.Exec("CREATE TABLE nums(n INTEGER PRIMARY KEY, sq INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2400) INSERT INTO nums SELECT n, n * n FROM c"); err != nil {
		t.Fatal(err)
	}
	l := newLookup(t, sqltool.LookupConfig{DB: db, Table: "nums", Key: "n", Columns: []string{"sq"}})
	const n = 2500
	args := make([]json.RawMessage, n)
	want := make([]result, n)
	for i := range n {
		args[i] = json.RawMessage(fmt.Sprintf(`{"key":%d}`, i+1))
		if i+1 <= 2400 {
			want[i].Content = fmt.Sprintf(`{"sq":%d}`, (i+1)*(i+1))
		} else {
			want[i].Err = fmt.Sprintf("no row in nums with n = %d", i+1)
		}
	}
	if diff := cmp.Diff(want, results(l.CallBatch(t.Context(), args))); diff != "" {
		t.Errorf("CallBatch(%d keys) mismatch (-want +got):\n%s", n, diff)
	}
}

func TestLookupMaxRows(t *testing.T) {
	_, db := newUsersDB(t)
	l := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "team", Columns: []string{"id"}, MaxRows: 1})
	want := "[{\"id\":1}]\n[truncated: more than 1 rows]"
	if got, err := l.Call(t.Context(), json.RawMessage(`{"key":"core"}`)); err != nil || got != want {
		t.Errorf("Call(core) = %q, %v, want %q, nil", got, err, want)
	}
	got := results(l.CallBatch(t.Context(), rawArgs(`{"key":"core"}`, `{"key":"web"}`)))
	wantBatch := []result{{Content: want}, {Content: "[{\"id\":3}]\n[truncated: more than 1 rows]"}}
	if diff := cmp.Diff(wantBatch, got); diff != "" {
		t.Errorf("CallBatch(core, web) mismatch (-want +got):\n%s", diff)
	}
}

func TestLookupQueryErrors(t *testing.T) {
	_, db := newUsersDB(t)
	l := newLookup(t, sqltool.LookupConfig{DB: db, Table: "nope", Key: "id"})
	if got, err := l.Call(t.Context(), json.RawMessage(`{"key":1}`)); err == nil || !strings.Contains(err.Error(), "no such table: nope") {
		t.Errorf("Call(missing table) = %q, %v, want SQLite's error", got, err)
	}
	// The query's error goes to every call it answers; a bad argument keeps
	// its own.
	got := results(l.CallBatch(t.Context(), rawArgs(`{"key":1}`, `{"key":null}`, `{"key":2}`)))
	if len(got) != 3 || !strings.Contains(got[0].Err, "no such table: nope") || got[2].Err != got[0].Err ||
		got[1].Err != `tool: bad arguments: "key" must be a string or a number, not null` {
		t.Errorf("CallBatch(missing table) = %+v, want the table error twice and the argument error once", got)
	}
	cols := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "id", Columns: []string{"nope"}})
	if got, err := cols.Call(t.Context(), json.RawMessage(`{"key":1}`)); err == nil || !strings.Contains(err.Error(), "no such column") {
		t.Errorf("Call(missing column) = %q, %v, want SQLite's error", got, err)
	}
}

func TestLookupConfig(t *testing.T) {
	_, db := newUsersDB(t)
	bad := []struct {
		name string
		cfg  sqltool.LookupConfig
		want string
	}{
		{"nil DB", sqltool.LookupConfig{Table: "users", Key: "id"}, "nil DB"},
		{"no table", sqltool.LookupConfig{DB: db, Key: "id"}, `Table "" is not an identifier`},
		{"no key", sqltool.LookupConfig{DB: db, Table: "users"}, `Key "" is not an identifier`},
		{"injection in table", sqltool.LookupConfig{DB: db, Table: "users; DROP TABLE users", Key: "id"}, `Table "users; DROP TABLE users" is not an identifier`},
		{"quoted table", sqltool.LookupConfig{DB: db, Table: `"users"`, Key: "id"}, `Table "\"users\"" is not an identifier`},
		{"schema-qualified table", sqltool.LookupConfig{DB: db, Table: "main.users", Key: "id"}, `Table "main.users" is not an identifier`},
		{"leading digit", sqltool.LookupConfig{DB: db, Table: "1users", Key: "id"}, `Table "1users" is not an identifier`},
		{"non-ASCII", sqltool.LookupConfig{DB: db, Table: "usérs", Key: "id"}, `Table "usérs" is not an identifier`},
		{"injection in key", sqltool.LookupConfig{DB: db, Table: "users", Key: "id = 1 OR 1"}, `Key "id = 1 OR 1" is not an identifier`},
		{"bad column", sqltool.LookupConfig{DB: db, Table: "users", Key: "id", Columns: []string{"name", "*"}}, `Columns[1] "*" is not an identifier`},
		{"negative MaxRows", sqltool.LookupConfig{DB: db, Table: "users", Key: "id", MaxRows: -1}, "negative MaxRows -1"},
		{"negative Timeout", sqltool.LookupConfig{DB: db, Table: "users", Key: "id", Timeout: -time.Second}, "negative Timeout -1s"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			l, err := sqltool.Lookup(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Lookup(%+v) = %v, %v, want an error containing %q", tt.cfg, l, err, tt.want)
			}
		})
	}
	_, err := sqltool.Lookup(sqltool.LookupConfig{Table: "a b", Key: "c d"})
	if err == nil || !strings.Contains(err.Error(), "nil DB") || !strings.Contains(err.Error(), "Table") || !strings.Contains(err.Error(), "Key") {
		t.Errorf("Lookup(several problems) = %v, want every problem listed", err)
	}

	spec := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "id", Columns: []string{"name"}}).Spec()
	want := "Look up rows of the table users by id. Returns the matching row as a JSON object with the columns name, " +
		"or a JSON array of objects when several rows match; it is an error when no row matches."
	if spec.Name != "sql_lookup" || spec.Description != want || spec.Cacheable {
		t.Errorf("Spec() = %+v, want name sql_lookup, description %q, not cacheable", spec, want)
	}
	var schema struct {
		Properties map[string]map[string]any
		Required   []string
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.Properties["key"]["description"] != "The id to look up." {
		t.Errorf("Spec().Parameters = %s, %v, want a schema with a described key", spec.Parameters, err)
	}
	spec = newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "id", Name: "user", Description: "Find a user.", Cacheable: true}).Spec()
	if spec.Name != "user" || spec.Description != "Find a user." || !spec.Cacheable {
		t.Errorf("Spec() = %+v, want the configured name, description and cacheability", spec)
	}
}

// TestLookupPoolBatches sends 20 concurrent calls with distinct keys
// through a Pool: they run as one batch, one execution, and each caller gets
// its own row or error. BatchMax is 20 and the window long, so the batch
// executes exactly when the 20th call joins, whatever the scheduling.
func TestLookupPoolBatches(t *testing.T) {
	_, db := newUsersDB(t)
	l := newLookup(t, sqltool.LookupConfig{DB: db, Table: "users", Key: "id", Columns: []string{"name"}, Cacheable: true})
	pool, err := tool.NewPool([]tool.Tool{l}, tool.PoolConfig{
		Policies: map[string]tool.Policy{"sql_lookup": {BatchWindow: time.Minute, BatchMax: 20}},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{1: `{"name":"Ada"}`, 2: `{"name":"Bob"}`, 3: `{"name":"Cy"}`, 4: `{"name":"Dee \"D\""}`}
	const n = 20
	var wg sync.WaitGroup
	got := make([]result, n)
	for i := range n {
		wg.Go(func() {
			r, err := pool.Call(t.Context(), "sql_lookup", json.RawMessage(fmt.Sprintf(`{"key":%d}`, i+1)))
			got[i].Content = r
			if err != nil {
				got[i].Err = err.Error()
			}
		})
	}
	wg.Wait()
	want := make([]result, n)
	for i := range n {
		if name, ok := names[i+1]; ok {
			want[i].Content = name
		} else {
			want[i].Err = fmt.Sprintf("tool sql_lookup: no row in users with id = %d", i+1)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
	st := pool.Stats()[0]
	wantStats := tool.Stats{Name: "sql_lookup", Requested: n, Executed: 1, Batches: 1, Errors: n - 4}
	if st != wantStats {
		t.Errorf("Stats() = %+v, want %+v", st, wantStats)
	}
	// Found rows are cached; the same keys again execute nothing new.
	for i := range 4 {
		if r, err := pool.Call(t.Context(), "sql_lookup", json.RawMessage(fmt.Sprintf(`{"key":%d}`, i+1))); err != nil || r != names[i+1] {
			t.Errorf("cached Call(%d) = %q, %v, want %q, nil", i+1, r, err, names[i+1])
		}
	}
	if st := pool.Stats()[0]; st.Executed != 1 || st.CacheHits != 4 {
		t.Errorf("Stats() = %+v, want 1 execution and 4 cache hits", st)
	}
}

// TestLookupTimeout looks up a key that an endless view never yields: the
// tool's timeout interrupts the query, for a single call and for every call
// of a batch. Like TestQueryTimeout it needs a real clock.
func TestLookupTimeout(t *testing.T) {
	_, db := newUsersDB(t)
	if _, err := db.Exec("CREATE VIEW endless AS WITH RECURSIVE c(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM c) SELECT id FROM c"); err != nil {
		t.Fatal(err)
	}
	l := newLookup(t, sqltool.LookupConfig{DB: db, Table: "endless", Key: "id", Timeout: 100 * time.Millisecond})
	if got, err := l.Call(t.Context(), json.RawMessage(`{"key":-1}`)); !errors.Is(err, tool.ErrTimeout) {
		t.Errorf("Call(never found) = %q, %v, want an error wrapping tool.ErrTimeout", got, err)
	}
	for i, r := range l.CallBatch(t.Context(), rawArgs(`{"key":-1}`, `{"key":1}`, `{"key":false}`)) {
		want := tool.ErrTimeout
		if i == 2 {
			want = tool.ErrBadArguments
		}
		if !errors.Is(r.Err, want) {
			t.Errorf("CallBatch(never found)[%d] = %+v, want an error wrapping %v", i, r, want)
		}
	}
}

// TestLookupTimeoutPerQuery checks that each query of a big batch has its
// own Timeout: two queries of 60ms each, under a Timeout of 100ms, both
// succeed. The database is a fake whose queries wait on the synctest clock.
func TestLookupTimeoutPerQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const queryTime = 60 * time.Millisecond
		db := sql.OpenDB(slowConnector{queryTime: queryTime})
		defer db.Close()
		l := newLookup(t, sqltool.LookupConfig{DB: db, Table: "t", Key: "k", Timeout: 100 * time.Millisecond})
		const n = 1500 // two queries: 1000 keys, then 500
		args := make([]json.RawMessage, n)
		want := make([]result, n)
		for i := range n {
			args[i] = json.RawMessage(fmt.Sprintf(`{"key":%d}`, i))
			want[i].Content = fmt.Sprintf(`{"v":%d}`, i)
		}
		start := time.Now()
		if diff := cmp.Diff(want, results(l.CallBatch(t.Context(), args))); diff != "" {
			t.Errorf("CallBatch(%d keys) mismatch (-want +got):\n%s", n, diff)
		}
		if got := time.Since(start); got != 2*queryTime {
			t.Errorf("CallBatch(%d keys) took %v, want %v", n, got, 2*queryTime)
		}
	})
}

// slowConnector is a database/sql connector whose queries take queryTime,
// or fail when their context ends first, and return one row (i, v) for the
// i-th parameter v: the rows a lookup batch query returns when every key
// has one row whose only column is v.
type slowConnector struct{ queryTime time.Duration }

func (c slowConnector) Connect(context.Context) (driver.Conn, error) { return slowConn(c), nil }
func (c slowConnector) Driver() driver.Driver                        { return slowDriver(c) }

// slowDriver is slowConnector's driver.
type slowDriver slowConnector

func (d slowDriver) Open(string) (driver.Conn, error) { return slowConn(d), nil }

// slowConn is a connection of slowConnector: it runs queries only.
type slowConn slowConnector

func (slowConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("slowConn: no statements")
}

func (slowConn) Begin() (driver.Tx, error) {
	return nil, errors.New("slowConn: no transactions")
}

func (slowConn) Close() error { return nil }

func (c slowConn) QueryContext(ctx context.Context, _ string, args []driver.NamedValue) (driver.Rows, error) {
	timer := time.NewTimer(c.queryTime)
	defer timer.Stop()
	select {
	case <-timer.C:
		return &paramRows{params: args}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// paramRows are the rows of slowConn: (i, v) for the i-th parameter v.
type paramRows struct {
	params []driver.NamedValue
	next   int
}

func (r *paramRows) Columns() []string { return []string{"i", "v"} }
func (r *paramRows) Close() error      { return nil }

func (r *paramRows) Next(dest []driver.Value) error {
	if r.next == len(r.params) {
		return io.EOF
	}
	dest[0], dest[1] = int64(r.next), r.params[r.next].Value
	r.next++
	return nil
}
