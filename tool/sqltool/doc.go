// Package sqltool provides SQL tools for agents: sql_query, which runs one
// read-only query, and a keyed lookup (sql_lookup) that answers a batch of
// keys with one query. Both work on a *sql.DB; [OpenSQLite] opens a SQLite
// file through the pure-Go driver modernc.org/sqlite, which this package
// registers.
//
// # Read-only queries
//
// [Query] refuses every statement but one SELECT, WITH … SELECT or EXPLAIN,
// reading it with a tokenizer that knows SQLite's strings, quoted
// identifiers, comments and parameters, so that no keyword hides in a string
// and no second statement hides behind a comment. What passes then runs in
// a read-only transaction and, for SQLite, with PRAGMA query_only=ON. Rows
// and time are capped.
//
// # Batched lookups
//
// [Lookup] returns a [tool.Batcher]: a [tool.Pool] groups the calls that
// arrive together and the tool answers all their keys with one query,
// giving each call its own row or its own error.
package sqltool
