package sqltool_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/tool/sqltool"
)

// acceptedSQLite are statements the check lets through for SQLite.
var acceptedSQLite = []string{
	"SELECT 1",
	"select * from users;",
	"  -- leading comment\n SELECT 1 ;; ",
	"/* x */SELECT 'DROP TABLE users; --' AS s",
	"SELECT 1 /* trailing; comment */",
	"SELECT 1 -- trailing; comment",
	"SELECT 1 /* unterminated comment runs to the end; DROP TABLE users",
	"WITH x AS (SELECT 1 AS n) SELECT n FROM x",
	"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 5) SELECT n FROM c",
	"EXPLAIN SELECT 1",
	"EXPLAIN QUERY PLAN SELECT * FROM users WHERE id = ?",
	"explain query plan with x as (select 1) select * from x",
	"SELECT replace(name, 'a', 'b') FROM users",
	"SELECT u.update, u.delete FROM users AS u",
	`SELECT "insert", [delete], ` + "`update`" + ` FROM users`,
	"SELECT 'it''s; DROP TABLE users' FROM users",
	"SELECT ?1, :name, @name, $name, #name, $a::b(';) FROM users",
	"SELECT 0x1F, 1_000, 1.5e-3, .5 FROM users",
	"SELECT x'ABCD'",
	"SELECT\tname\vFROM\fusers\r\n",
}

// refusedSQLite are statements the check refuses for SQLite, each with a
// piece of the error it must give.
var refusedSQLite = []struct {
	name, sql, want string
}{
	{"insert", "INSERT INTO users(name) VALUES ('x')", "INSERT statements are not allowed"},
	{"insert lower case", "insert into users(name) values ('x')", "INSERT statements are not allowed"},
	{"update", "UPDATE users SET name = 'x'", "UPDATE statements"},
	{"delete", "DELETE FROM users", "DELETE statements"},
	{"replace", "REPLACE INTO users(id, name) VALUES (1, 'x')", "REPLACE statements"},
	{"upsert", "INSERT INTO users(id) VALUES (1) ON CONFLICT DO NOTHING", "INSERT statements"},
	{"drop", "DROP TABLE users", "DROP statements"},
	{"create", "CREATE TABLE t(x)", "CREATE statements"},
	{"create temp", "CREATE TEMP TABLE t(x)", "CREATE statements"},
	{"alter", "ALTER TABLE users ADD COLUMN x", "ALTER statements"},
	{"attach", "ATTACH DATABASE 'other.db' AS other", "ATTACH statements"},
	{"detach", "DETACH DATABASE other", "DETACH statements"},
	{"pragma", "PRAGMA query_only = OFF", "PRAGMA statements"},
	{"pragma read", "PRAGMA table_info(users)", "PRAGMA statements"},
	{"vacuum", "VACUUM", "VACUUM statements"},
	{"vacuum into", "VACUUM INTO 'copy.db'", "VACUUM statements"},
	{"reindex", "REINDEX users", "REINDEX statements"},
	{"analyze", "ANALYZE", "ANALYZE statements"},
	{"begin", "BEGIN", "BEGIN statements"},
	{"commit", "COMMIT", "COMMIT statements"},
	{"savepoint", "SAVEPOINT s", "SAVEPOINT statements"},
	{"values", "VALUES (1)", "VALUES statements"},
	{"parenthesised", "(SELECT 1)", `cannot start with "("`},
	{"two statements", "SELECT 1; DROP TABLE users", "multiple statements are not allowed (a second statement, DROP"},
	{"two selects", "SELECT 1; SELECT 2", "multiple statements"},
	{"second after comment", "SELECT 1 -- comment\n; DELETE FROM users", "a second statement, DELETE"},
	{"second after block comment", "SELECT 1 /* ; */; DELETE FROM users", "a second statement, DELETE"},
	{"empty first", "; SELECT 1", "multiple statements"},
	{"comment hides first word", "/* SELECT */ DROP TABLE users", "DROP statements"},
	{"line comment hides first word", "-- SELECT\nDELETE FROM users", "DELETE statements"},
	{"string does not end the statement", "SELECT 'a'; DROP TABLE users; --'", "a second statement, DROP"},
	{"quoted identifier does not hide", `SELECT "a"; DROP TABLE users`, "a second statement, DROP"},
	{"bracket identifier with quote", "SELECT [a'] ; DROP TABLE users; --']", "a second statement, DROP"},
	{"tcl variable swallows a quote", "SELECT $a(') ; DROP TABLE users; --'", "a second statement, DROP"},
	{"with insert", "WITH x AS (SELECT 1) INSERT INTO users(id) SELECT * FROM x", "WITH … INSERT is not allowed"},
	{"with delete", "WITH x AS (SELECT 1) DELETE FROM users", "WITH … DELETE is not allowed"},
	{"with update", "WITH x AS (SELECT 1) UPDATE users SET name = 'x'", "WITH … UPDATE is not allowed"},
	{"with replace", "WITH x AS (SELECT 1) REPLACE INTO users(id) SELECT * FROM x", "WITH … REPLACE is not allowed"},
	{"data-modifying CTE", "WITH x AS (DELETE FROM users RETURNING *) SELECT * FROM x", "WITH … DELETE is not allowed"},
	{"merge CTE", "WITH x AS (MERGE INTO users USING t ON true WHEN MATCHED THEN DELETE) SELECT 1", "WITH … MERGE is not allowed"},
	{"select into", "SELECT * INTO copy FROM users", "SELECT … INTO is not allowed"},
	{"number glued to into", "SELECT 1INTO copy", "SELECT … INTO is not allowed"},
	{"explain delete", "EXPLAIN DELETE FROM users", "EXPLAIN DELETE is not allowed"},
	{"explain query plan pragma", "EXPLAIN QUERY PLAN PRAGMA query_only=OFF", "EXPLAIN PRAGMA is not allowed"},
	{"explain with insert", "EXPLAIN WITH x AS (SELECT 1) INSERT INTO users(id) SELECT * FROM x", "WITH … INSERT"},
	{"explain nothing", "EXPLAIN QUERY PLAN", "EXPLAIN of nothing"},
	{"empty", "", "empty statement"},
	{"blank", " \n\t", "empty statement"},
	{"only semicolons", " ; ;", "empty statement"},
	{"only comment", "-- SELECT 1", "empty statement"},
	{"unterminated string", "SELECT 'abc", "unterminated string"},
	{"unterminated identifier", `SELECT "abc`, "unterminated quoted identifier"},
	{"unterminated bracket", "SELECT [abc", "unterminated [identifier]"},
	{"nul byte", "SELECT 1\x00; DROP TABLE users", "NUL byte at offset 8"},
	{"malformed variable", "SELECT $", "malformed parameter"},
	{"unclosed tcl suffix", "SELECT $a(b c)", "malformed parameter"},
	{"long first word", strings.Repeat("x", 100), "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX… statements are not allowed"},
}

func TestCheckStatementAccepts(t *testing.T) {
	for _, sql := range acceptedSQLite {
		if err := sqltool.CheckStatement(sql, false); err != nil {
			t.Errorf("CheckStatement(%q, sqlite) = %v, want nil", sql, err)
		}
	}
}

func TestCheckStatementRefuses(t *testing.T) {
	for _, tt := range refusedSQLite {
		t.Run(tt.name, func(t *testing.T) {
			for _, generic := range []bool{false, true} {
				err := sqltool.CheckStatement(tt.sql, generic)
				if !errors.Is(err, sqltool.ErrNotReadOnly) {
					t.Fatalf("CheckStatement(%q, generic=%v) = %v, want an error wrapping ErrNotReadOnly", tt.sql, generic, err)
				}
				if generic {
					continue // the stricter lexer may refuse for another reason first
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("CheckStatement(%q) = %q, want it to contain %q", tt.sql, err, tt.want)
				}
				if !strings.HasSuffix(err.Error(), "only one read-only query runs: SELECT, WITH … SELECT or EXPLAIN") {
					t.Errorf("CheckStatement(%q) = %q, want it to end with what may run", tt.sql, err)
				}
			}
		})
	}
}

// TestCheckStatementGeneric covers the stricter lexer for databases other
// than SQLite: what they read differently is refused.
func TestCheckStatementGeneric(t *testing.T) {
	accepted := []string{
		"SELECT $1, $2 FROM users WHERE name = 'a'",
		"SELECT a[1], b[2:3] FROM t",
		"SELECT 1 -- comment\n",
		"SELECT 1 --",
		"SELECT 1 /* comment */",
		"SELECT :name, @p FROM t",
		"WITH x AS (SELECT 1) SELECT * FROM x;",
	}
	for _, sql := range accepted {
		if err := sqltool.CheckStatement(sql, true); err != nil {
			t.Errorf("CheckStatement(%q, generic) = %v, want nil", sql, err)
		}
	}
	refused := []struct{ name, sql, want string }{
		{"backslash escape", `SELECT '\'' INTO OUTFILE '/tmp/x' -- '`, "a backslash or ';' inside a string"},
		{"backslash in identifier", `SELECT "a\" FROM t`, "a backslash or ';' inside a quoted identifier"},
		{"semicolon in string", "SELECT ';'", "a backslash or ';' inside a string"},
		{"hash comment", "SELECT 1 # '\n INTO OUTFILE '/tmp/x' -- '", "'#' is not allowed"},
		{"dollar quoting", "SELECT $$ '$$ ; DROP TABLE t; --'", "dollar-quoted strings are not allowed"},
		{"tagged dollar quoting", "SELECT $q$x$q$", "dollar-quoted strings are not allowed"},
		{"executable comment", "SELECT 1 /*! INTO OUTFILE '/tmp/x' */", `"/*!" comments are not allowed`},
		{"nested comment", "SELECT 1 /* /* */ '*/), y AS (DELETE FROM t) SELECT 1 /*'*/", "nested comments are not allowed"},
		{"semicolon in comment", "SELECT 1 /* ; */", "';' inside a comment"},
		{"semicolon in line comment", "SELECT 1 -- ;\n", "';' inside a comment"},
		{"dash dash without space", "SELECT 1 --'\n; DROP TABLE t; --'", `"--" must be followed by a space`},
		{"bracket with quote", "SELECT x[']'] INTO t FROM u -- ']", "a quote, ';' or comment marker inside [brackets]"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := sqltool.CheckStatement(tt.sql, true)
			if !errors.Is(err, sqltool.ErrNotReadOnly) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckStatement(%q, generic) = %v, want an ErrNotReadOnly containing %q", tt.sql, err, tt.want)
			}
		})
	}
}

// FuzzStatementCheck checks that the read-only check never panics and that
// whatever it accepts, in either dialect, begins with SELECT, WITH or
// EXPLAIN once comments and white space are skipped and holds no second
// statement, both judged by statementShape, a separate character-level
// scanner.
func FuzzStatementCheck(f *testing.F) {
	for _, sql := range acceptedSQLite {
		f.Add(sql)
	}
	for _, tt := range refusedSQLite {
		f.Add(tt.sql)
	}
	f.Add("SELECT $a(');DROP TABLE t;--') FROM t")
	f.Add("SELECT [x;y] FROM t; /* */ ;")
	f.Add("SELECT `a``;` FROM t")
	f.Fuzz(func(t *testing.T, sql string) {
		for _, generic := range []bool{false, true} {
			err := sqltool.CheckStatement(sql, generic)
			if err != nil {
				if !errors.Is(err, sqltool.ErrNotReadOnly) {
					t.Fatalf("CheckStatement(%q, generic=%v) = %v, want nil or an ErrNotReadOnly", sql, generic, err)
				}
				continue
			}
			first, second := statementShape(sql)
			if first != "SELECT" && first != "WITH" && first != "EXPLAIN" {
				t.Errorf("CheckStatement(%q, generic=%v) = nil, but its first word is %q", sql, generic, first)
			}
			if second {
				t.Errorf("CheckStatement(%q, generic=%v) = nil, but a second statement follows a ';'", sql, generic)
			}
		}
	})
}

// statementShape scans sql as SQLite does, one character at a time, and
// returns its first word, upper-cased ("" if it starts with anything else),
// and whether anything but white space, comments and ';' follows the first
// ';' that ends a non-empty statement.
func statementShape(sql string) (first string, second bool) {
	seen, ended := false, false
	token := func() {
		if ended {
			second = true
		}
		seen = true
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case strings.HasPrefix(sql[i:], "/*"):
			if end := strings.Index(sql[i+2:], "*/"); end >= 0 {
				i += end + 4
			} else {
				i = len(sql)
			}
		case c == ';':
			if seen {
				ended = true
			}
			i++
		case c == '\'' || c == '"' || c == '`' || c == '[':
			token()
			closer := c
			if c == '[' {
				closer = ']'
			}
			i++
			for i < len(sql) && sql[i] != closer {
				i++
			}
			i++ // a doubled quote reads as two adjacent tokens: same extent
		case c == '$' || c == '@' || c == ':' || c == '#':
			token()
			i++
			for i < len(sql) {
				switch d := sql[i]; {
				case isWordByte(d):
					i++
					continue
				case d == ':' && i+1 < len(sql) && sql[i+1] == ':':
					i += 2
					continue
				case d == '(':
					for i < len(sql) && !strings.ContainsRune(" \t\n\v\f\r)", rune(sql[i])) {
						i++
					}
					i++
				}
				break
			}
		case isWordByte(c):
			start := i
			for i < len(sql) && isWordByte(sql[i]) {
				i++
			}
			if !seen && !isDigitByte(c) {
				first = strings.ToUpper(sql[start:i])
			}
			token()
		default:
			token()
			i++
		}
	}
	return first, second
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

func isDigitByte(c byte) bool { return '0' <= c && c <= '9' }
