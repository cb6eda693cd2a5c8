package sqltool_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/sqltool"
)

// usersSchema and usersRows make the test database.
const usersSchema = `CREATE TABLE users (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL,
	team TEXT,
	score REAL,
	avatar BLOB,
	note TEXT
);
CREATE INDEX users_team ON users(team);`

const usersRows = `INSERT INTO users VALUES
	(1, 'Ada', 'core', 9.5, x'0102', NULL),
	(2, 'Bob', 'core', 7, NULL, 'likes	tabs'),
	(3, 'Cy', 'web', NULL, NULL, 'line1
line2'),
	(4, 'Dee "D"', 'web', -1.25, x'', 'ünï');`

// newUsersDB creates the users database in a temporary directory and returns
// its path and a writable handle, closed when the test ends.
func newUsersDB(t testing.TB) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.db")
	db, err := sqltool.OpenSQLite(path, false)
	if err != nil {
		t.Fatalf("OpenSQLite(%q, false) = %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	for _, stmt := range []string{usersSchema, usersRows} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("Exec(%q) = %v", stmt, err)
		}
	}
	return path, db
}

// newQuery returns the sql_query tool for cfg, failing the test on error.
func newQuery(t testing.TB, cfg sqltool.QueryConfig) tool.Tool {
	t.Helper()
	q, err := sqltool.Query(cfg)
	if err != nil {
		t.Fatalf("Query(%+v) = %v", cfg, err)
	}
	return q
}

// callQuery calls q with sql and params as its arguments.
func callQuery(t testing.TB, q tool.Tool, sql string, params ...any) (string, error) {
	t.Helper()
	a := map[string]any{"sql": sql}
	if params != nil {
		a["args"] = params
	}
	args, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if tt, ok := t.(*testing.T); ok {
		ctx = tt.Context()
	}
	return q.Call(ctx, args)
}

// snapshot describes everything a write could change: the schema (the temp
// schema of the connection it runs on), the rows, the attached databases and
// the user version.
func snapshot(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		"SELECT type, name, sql FROM sqlite_schema ORDER BY name",
		"SELECT * FROM users ORDER BY id",
		"SELECT type, name, sql FROM sqlite_temp_schema ORDER BY name",
		// temp shows up once a connection has used it, which changes nothing.
		"SELECT name FROM pragma_database_list WHERE name <> 'temp' ORDER BY seq",
		"SELECT user_version FROM pragma_user_version",
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("Query(%q) = %v", q, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(vals)
			b.Write(out)
			b.WriteByte('\n')
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestQueryResults(t *testing.T) {
	_, db := newUsersDB(t)
	q := newQuery(t, sqltool.QueryConfig{DB: db})
	tests := []struct {
		name   string
		sql    string
		params []any
		want   string
	}{
		{
			name: "all rows",
			sql:  "SELECT * FROM users ORDER BY id",
			want: "id\tname\tteam\tscore\tavatar\tnote\n" +
				"1\t\"Ada\"\t\"core\"\t9.5\t<2 bytes>\tnull\n" +
				"2\t\"Bob\"\t\"core\"\t7\tnull\t\"likes\\ttabs\"\n" +
				"3\t\"Cy\"\t\"web\"\tnull\tnull\t\"line1\\nline2\"\n" +
				"4\t\"Dee \\\"D\\\"\"\t\"web\"\t-1.25\t<0 bytes>\t\"ünï\"\n",
		},
		{
			name:   "args",
			sql:    "SELECT name FROM users WHERE team = ? AND score > ? ORDER BY id",
			params: []any{"core", 8},
			want:   "name\n\"Ada\"\n",
		},
		{
			name:   "args of every type",
			sql:    "SELECT ? AS s, ? AS i, ? AS f, ? AS b, ? AS n",
			params: []any{"x\ty", 12345678901, 0.5, true, nil},
			want:   "s\ti\tf\tb\tn\n\"x\\ty\"\t12345678901\t0.5\t1\tnull\n",
		},
		{
			name: "no rows",
			sql:  "SELECT id, name FROM users WHERE id > 100",
			want: "id\tname\n",
		},
		{
			name: "aggregate",
			sql:  "SELECT team, count(*) AS n, avg(score) FROM users GROUP BY team ORDER BY team",
			want: "team\tn\tavg(score)\n\"core\"\t2\t8.25\n\"web\"\t2\t-1.25\n",
		},
		{
			name: "odd column names",
			sql:  `SELECT 1 AS "a b", 2 AS "tab	name", 3 AS """q"""`,
			want: "a b\t\"tab\\tname\"\t\"\\\"q\\\"\"\n1\t2\t3\n",
		},
		{
			name: "with",
			sql:  "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) SELECT n, n * 1.5 AS f FROM c",
			want: "n\tf\n1\t1.5\n2\t3\n3\t4.5\n",
		},
		{
			name: "non-finite and big floats",
			sql:  "SELECT 1e999 AS inf, -1e999 AS ninf, 1e300 AS big, 1e-7 AS small",
			want: "inf\tninf\tbig\tsmall\n\"+Inf\"\t\"-Inf\"\t1e+300\t1e-7\n",
		},
		{
			name: "keywords inside strings and comments",
			sql:  "SELECT 'DROP TABLE users; --' AS s /* ; DELETE */ -- ; INSERT",
			want: "s\n\"DROP TABLE users; --\"\n",
		},
		{
			name: "trailing semicolons",
			sql:  "SELECT 1 AS one;;",
			want: "one\n1\n",
		},
		{
			name: "table-valued pragma",
			sql:  "SELECT name, type FROM pragma_table_info('users') WHERE pk = 1",
			want: "name\ttype\n\"id\"\t\"INTEGER\"\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callQuery(t, q, tt.sql, tt.params...)
			if err != nil {
				t.Fatalf("sql_query(%q) error = %v", tt.sql, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sql_query(%q) mismatch (-want +got):\n%s", tt.sql, diff)
			}
		})
	}
}

func TestQueryMaxRows(t *testing.T) {
	_, db := newUsersDB(t)
	q := newQuery(t, sqltool.QueryConfig{DB: db, MaxRows: 3})
	const series = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?) SELECT n FROM c"
	tests := []struct {
		name string
		n    int
		want string
	}{
		{"under the cap", 2, "n\n1\n2\n"},
		{"at the cap", 3, "n\n1\n2\n3\n"},
		{"over the cap", 4, "n\n1\n2\n3\n[truncated: more than 3 rows]\n"},
		// Rows are read lazily: a billion-row series stops at the cap.
		{"far over the cap", 1_000_000_000, "n\n1\n2\n3\n[truncated: more than 3 rows]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callQuery(t, q, series, tt.n)
			if err != nil || got != tt.want {
				t.Errorf("sql_query(series of %d) = %q, %v, want %q, nil", tt.n, got, err, tt.want)
			}
		})
	}
}

// TestQueryTimeout runs a query that never ends: the tool's own timeout
// interrupts it. SQLite runs on this goroutine's CPU, so a synctest bubble
// would never see it block: this test uses a short real timeout.
func TestQueryTimeout(t *testing.T) {
	_, db := newUsersDB(t)
	q := newQuery(t, sqltool.QueryConfig{DB: db, Timeout: 100 * time.Millisecond})
	start := time.Now()
	got, err := callQuery(t, q, "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT max(n) FROM c")
	if !errors.Is(err, tool.ErrTimeout) || !strings.Contains(err.Error(), "query ran past 100ms") {
		t.Fatalf("sql_query(endless) = %q, %v, want an error wrapping tool.ErrTimeout", got, err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("sql_query(endless) took %v, want about 100ms", elapsed)
	}
	// The connection is usable afterwards, and query_only is off again.
	if _, err := db.Exec("UPDATE users SET score = 1 WHERE id = 1"); err != nil {
		t.Errorf("write after a timed-out query = %v, want nil", err)
	}
}

// TestQueryRefusesWrites sends every kind of write through the tool, on a
// writable database, and checks that each is refused with a clear error and
// that nothing changed.
func TestQueryRefusesWrites(t *testing.T) {
	dir, db := newUsersDB(t)
	dir = filepath.Dir(dir)
	attached := filepath.Join(dir, "other.db")
	q := newQuery(t, sqltool.QueryConfig{DB: db})
	before := snapshot(t, db)
	tests := []struct{ name, sql, want string }{
		{"insert", "INSERT INTO users(name) VALUES ('x')", "INSERT statements are not allowed"},
		{"update", "UPDATE users SET name = 'x'", "UPDATE statements are not allowed"},
		{"delete", "DELETE FROM users", "DELETE statements are not allowed"},
		{"replace", "REPLACE INTO users(id, name) VALUES (1, 'x')", "REPLACE statements are not allowed"},
		{"drop", "DROP TABLE users", "DROP statements are not allowed"},
		{"create", "CREATE TABLE t(x)", "CREATE statements are not allowed"},
		{"create temp", "CREATE TEMP TABLE t(x)", "CREATE statements are not allowed"},
		{"alter", "ALTER TABLE users ADD COLUMN x", "ALTER statements are not allowed"},
		{"attach", "ATTACH DATABASE '" + attached + "' AS other", "ATTACH statements are not allowed"},
		{"detach", "DETACH DATABASE main", "DETACH statements are not allowed"},
		{"pragma write", "PRAGMA user_version = 7", "PRAGMA statements are not allowed"},
		{"pragma query_only off", "PRAGMA query_only = OFF", "PRAGMA statements are not allowed"},
		{"vacuum into", "VACUUM INTO '" + filepath.Join(dir, "copy.db") + "'", "VACUUM statements are not allowed"},
		{"reindex", "REINDEX users", "REINDEX statements are not allowed"},
		{"two statements", "SELECT 1; DELETE FROM users", "multiple statements are not allowed (a second statement, DELETE"},
		{"comment hides second statement", "SELECT 1 -- x\n; DROP TABLE users", "a second statement, DROP"},
		{"block comment hides first word", "/* SELECT */ DELETE FROM users", "DELETE statements are not allowed"},
		{"string hides nothing", "SELECT ''; DELETE FROM users; --'", "a second statement, DELETE"},
		{"with insert", "WITH x(n) AS (SELECT 5) INSERT INTO users(id, name) SELECT n, 'x' FROM x", "WITH … INSERT is not allowed"},
		{"with delete", "WITH x AS (SELECT 1) DELETE FROM users", "WITH … DELETE is not allowed"},
		{"explain of a write", "EXPLAIN DELETE FROM users", "EXPLAIN DELETE is not allowed"},
		{"select into", "SELECT * INTO copy FROM users", "SELECT … INTO is not allowed"},
		{"nul byte", "SELECT 1\x00; DELETE FROM users", "NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callQuery(t, q, tt.sql)
			if !errors.Is(err, sqltool.ErrNotReadOnly) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("sql_query(%q) = %q, %v, want an ErrNotReadOnly containing %q", tt.sql, got, err, tt.want)
			}
		})
	}
	if diff := cmp.Diff(before, snapshot(t, db)); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
	for _, name := range []string{"other.db", "copy.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Stat(%s) = %v, want it not to exist", name, err)
		}
	}
}

// TestQueryOnly checks the third layer through the tool itself: the query
// runs with PRAGMA query_only on, which is off again afterwards so that a
// shared DB keeps working for writers.
func TestQueryOnly(t *testing.T) {
	_, db := newUsersDB(t)
	db.SetMaxOpenConns(1) // the tool and the writes below share one connection
	q := newQuery(t, sqltool.QueryConfig{DB: db})
	for range 2 {
		got, err := callQuery(t, q, "SELECT query_only FROM pragma_query_only")
		if want := "query_only\n1\n"; err != nil || got != want {
			t.Fatalf("sql_query(query_only) = %q, %v, want %q, nil", got, err, want)
		}
		if _, err := db.Exec("UPDATE users SET score = score + 1 WHERE id = 1"); err != nil {
			t.Fatalf("write after sql_query = %v, want nil: query_only must be off again", err)
		}
	}
}

// TestQueryWriteBlockedBehindCheck runs writes that the statement check would
// refuse through the layers behind it: SQLite's query_only refuses them, and
// the database is unchanged.
func TestQueryWriteBlockedBehindCheck(t *testing.T) {
	dir, db := newUsersDB(t)
	dir = filepath.Dir(dir)
	db.SetMaxOpenConns(1) // snapshot sees the tool's connection's temp schema
	q := newQuery(t, sqltool.QueryConfig{DB: db})
	before := snapshot(t, db)
	writes := []string{
		"INSERT INTO users(name) VALUES ('x')",
		"UPDATE users SET name = 'x'",
		"DELETE FROM users",
		"WITH x(n) AS (SELECT 5) INSERT INTO users(id, name) SELECT n, 'x' FROM x",
		"DROP TABLE users",
		"CREATE TABLE t(x)",
		"CREATE TEMP TABLE t(x)",
		"ALTER TABLE users ADD COLUMN x",
		"PRAGMA user_version = 7",
		"VACUUM INTO '" + filepath.Join(dir, "copy.db") + "'",
		"SELECT 1; DELETE FROM users",
	}
	for _, stmt := range writes {
		got, err := sqltool.RunUnchecked(t.Context(), q, stmt)
		// VACUUM fails first because it cannot run in a transaction.
		if err == nil || !strings.Contains(err.Error(), "readonly database") && !strings.Contains(err.Error(), "cannot VACUUM from within a transaction") {
			t.Errorf("unchecked sql_query(%q) = %q, %v, want SQLite's read-only error", stmt, got, err)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, db)); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "copy.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat(copy.db) = %v, want it not to exist", err)
	}
}

// TestOpenSQLiteReadOnly checks mode=ro: even a connection that turns
// query_only off cannot write.
func TestOpenSQLiteReadOnly(t *testing.T) {
	path, rw := newUsersDB(t)
	before := snapshot(t, rw)
	db, err := sqltool.OpenSQLite(path, true)
	if err != nil {
		t.Fatalf("OpenSQLite(%q, true) = %v", path, err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var on bool
	if err := conn.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&on); err != nil || !on {
		t.Errorf("PRAGMA query_only = %v, %v, want true, nil", on, err)
	}
	if _, err := conn.ExecContext(t.Context(), "PRAGMA query_only = OFF"); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(t.Context(), "DELETE FROM users")
	if err == nil || !strings.Contains(err.Error(), "readonly database") {
		t.Errorf("DELETE on a read-only DB = %v, want SQLite's read-only error", err)
	}
	q := newQuery(t, sqltool.QueryConfig{DB: db})
	if got, err := callQuery(t, q, "SELECT count(*) AS n FROM users"); err != nil || got != "n\n4\n" {
		t.Errorf("sql_query(count) on a read-only DB = %q, %v, want %q, nil", got, err, "n\n4\n")
	}
	if diff := cmp.Diff(before, snapshot(t, rw)); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if db, err := sqltool.OpenSQLite(missing, true); err == nil {
		db.Close()
		t.Errorf("OpenSQLite(missing, true) = nil error, want one")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenSQLite(missing, true) created the file: Stat = %v", err)
	}
	if _, err := sqltool.OpenSQLite("", false); err == nil {
		t.Errorf("OpenSQLite(\"\", false) = nil error, want one")
	}
	// Characters that mean something in a URI stay part of the file name.
	odd := filepath.Join(dir, "a b?c#d%20e.db")
	db, err := sqltool.OpenSQLite(odd, false)
	if err != nil {
		t.Fatalf("OpenSQLite(%q, false) = %v", odd, err)
	}
	_, err = db.Exec("CREATE TABLE t(x); INSERT INTO t VALUES (42)")
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(odd); err != nil {
		t.Errorf("Stat(%q) = %v, want the file there", odd, err)
	}
	db, err = sqltool.OpenSQLite(odd, true)
	if err != nil {
		t.Fatalf("OpenSQLite(%q, true) = %v", odd, err)
	}
	defer db.Close()
	var x int
	if err := db.QueryRow("SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Errorf("SELECT x = %d, %v, want 42, nil", x, err)
	}
}

func TestQueryErrors(t *testing.T) {
	_, db := newUsersDB(t)
	q := newQuery(t, sqltool.QueryConfig{DB: db})
	bad := []struct{ name, args string }{
		{"not an object", `[1]`},
		{"missing sql", `{}`},
		{"sql not a string", `{"sql": 1}`},
		{"unknown field", `{"sql": "SELECT 1", "limit": 5}`},
		{"args not an array", `{"sql": "SELECT ?", "args": "x"}`},
		{"object arg", `{"sql": "SELECT ?", "args": [{"a": 1}]}`},
		{"array arg", `{"sql": "SELECT ?", "args": [[1]]}`},
		{"huge number", `{"sql": "SELECT ?", "args": [1e999]}`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			got, err := q.Call(t.Context(), json.RawMessage(tt.args))
			if !errors.Is(err, tool.ErrBadArguments) {
				t.Errorf("sql_query(%s) = %q, %v, want an error wrapping tool.ErrBadArguments", tt.args, got, err)
			}
		})
	}
	got, err := callQuery(t, q, "SELECT * FROM nope")
	if err == nil || !strings.Contains(err.Error(), "no such table: nope") {
		t.Errorf("sql_query(missing table) = %q, %v, want SQLite's error", got, err)
	}
}

func TestQueryConfig(t *testing.T) {
	_, db := newUsersDB(t)
	bad := []struct {
		name string
		cfg  sqltool.QueryConfig
		want string
	}{
		{"nil DB", sqltool.QueryConfig{}, "nil DB"},
		{"unknown dialect", sqltool.QueryConfig{DB: db, Dialect: "postgres"}, `unknown Dialect "postgres"`},
		{"negative MaxRows", sqltool.QueryConfig{DB: db, MaxRows: -1}, "negative MaxRows -1"},
		{"negative Timeout", sqltool.QueryConfig{DB: db, Timeout: -time.Second}, "negative Timeout -1s"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			q, err := sqltool.Query(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Query(%+v) = %v, %v, want an error containing %q", tt.cfg, q, err, tt.want)
			}
		})
	}
	q := newQuery(t, sqltool.QueryConfig{DB: db, Cacheable: true, Dialect: sqltool.DialectGeneric})
	spec := q.Spec()
	if spec.Name != "sql_query" || !spec.Cacheable || !strings.Contains(spec.Description, "At most 200 rows") {
		t.Errorf("Spec() = %+v, want name sql_query, cacheable, default caps described", spec)
	}
	var schema map[string]any
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
		t.Errorf("Spec().Parameters = %s: %v", spec.Parameters, err)
	}
	// The generic dialect checks too, and runs in a read-only transaction.
	if got, err := callQuery(t, q, "SELECT name FROM users WHERE id = ?", 2); err != nil || got != "name\n\"Bob\"\n" {
		t.Errorf("generic sql_query = %q, %v, want %q, nil", got, err, "name\n\"Bob\"\n")
	}
	if _, err := callQuery(t, q, "DELETE FROM users"); !errors.Is(err, sqltool.ErrNotReadOnly) {
		t.Errorf("generic sql_query(DELETE) = %v, want ErrNotReadOnly", err)
	}
}

// TestQueryPool runs many concurrent calls through a Pool: identical calls
// share an execution, distinct ones run concurrently on the DB.
func TestQueryPool(t *testing.T) {
	_, db := newUsersDB(t)
	q := newQuery(t, sqltool.QueryConfig{DB: db, Cacheable: true})
	pool, err := tool.NewPool([]tool.Tool{q}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		go func() {
			args, _ := json.Marshal(map[string]any{"sql": "SELECT name FROM users WHERE id = ?", "args": []any{i%4 + 1}})
			got, err := pool.Call(t.Context(), "sql_query", args)
			if err == nil && !strings.HasPrefix(got, "name\n\"") {
				err = errors.New("unexpected result " + got)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	st := pool.Stats()[0]
	if st.Requested != n || st.Errors != 0 || st.Executed+st.Coalesced+st.CacheHits != n || st.Executed != 4 {
		t.Errorf("Stats() = %+v, want %d calls, 4 executions and no errors", st, n)
	}
}
