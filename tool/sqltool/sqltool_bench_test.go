package sqltool_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/batchagent/batchagent/tool/sqltool"
)

func BenchmarkCheckStatement(b *testing.B) {
	const sql = "WITH recent AS (SELECT id, name FROM users WHERE team = ? /* recent */) " +
		"SELECT r.name, count(*) AS n FROM recent AS r JOIN orders AS o ON o.user_id = r.id " +
		"WHERE o.note <> 'it''s; fine' GROUP BY r.name ORDER BY n DESC LIMIT 10;"
	b.ReportAllocs()
	b.SetBytes(int64(len(sql)))
	for b.Loop() {
		if err := sqltool.CheckStatement(sql, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQuery(b *testing.B) {
	_, db := newUsersDB(b)
	q := newQuery(b, sqltool.QueryConfig{DB: db})
	args := json.RawMessage(`{"sql":"SELECT * FROM users ORDER BY id"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup compares 100 keys looked up one Call at a time with the
// same keys in one CallBatch.
func BenchmarkLookup(b *testing.B) {
	_, db := newUsersDB(b)
	if _, err := db.Exec("CREATE TABLE nums(n INTEGER PRIMARY KEY, sq INTEGER)"); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 10000) INSERT INTO nums SELECT n, n * n FROM c"); err != nil {
		b.Fatal(err)
	}
	l := newLookup(b, sqltool.LookupConfig{DB: db, Table: "nums", Key: "n"})
	args := make([]json.RawMessage, 100)
	for i := range args {
		args[i] = json.RawMessage(fmt.Sprintf(`{"key":%d}`, i*97+1))
	}
	b.Run("Call100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, a := range args {
				if _, err := l.Call(b.Context(), a); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("CallBatch100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, r := range l.CallBatch(b.Context(), args) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
	})
}
