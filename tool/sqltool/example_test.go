package sqltool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/sqltool"
)

func ExampleQuery() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqltool.OpenSQLite(filepath.Join(dir, "shop.db"), false)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, price REAL);
		INSERT INTO products VALUES ('A1', 'Widget', 2.5), ('B2', 'Gadget', 10), ('C3', 'Gizmo', NULL)`)
	if err != nil {
		fmt.Println(err)
		return
	}

	query, err := sqltool.Query(sqltool.QueryConfig{DB: db, MaxRows: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, args := range []string{
		`{"sql": "SELECT name, price FROM products WHERE price < ? ORDER BY sku", "args": [100]}`,
		`{"sql": "SELECT sku FROM products ORDER BY sku"}`,
		`{"sql": "DELETE FROM products"}`,
		`{"sql": "SELECT 1; DROP TABLE products"}`,
	} {
		result, err := query.Call(ctx, json.RawMessage(args))
		if err != nil {
			result = err.Error() + "\n"
		}
		fmt.Print(result)
	}
	// Output:
	// name	price
	// "Widget"	2.5
	// "Gadget"	10
	// sku
	// "A1"
	// "B2"
	// [truncated: more than 2 rows]
	// sqltool: not a read-only query: DELETE statements are not allowed; only one read-only query runs: SELECT, WITH … SELECT or EXPLAIN
	// sqltool: not a read-only query: multiple statements are not allowed (a second statement, DROP, follows ';'); only one read-only query runs: SELECT, WITH … SELECT or EXPLAIN
}

func ExampleLookup() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqltool.OpenSQLite(filepath.Join(dir, "shop.db"), false)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, price REAL);
		INSERT INTO products VALUES ('A1', 'Widget', 2.5), ('B2', 'Gadget', 10), ('C3', 'Gizmo', NULL)`)
	if err != nil {
		fmt.Println(err)
		return
	}

	lookup, err := sqltool.Lookup(sqltool.LookupConfig{
		DB: db, Table: "products", Key: "sku", Columns: []string{"name", "price"}, Cacheable: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Calls arriving within a second of the first run as one batch, which
	// executes at once when it has 4 calls: one query for every key.
	pool, err := tool.NewPool([]tool.Tool{lookup}, tool.PoolConfig{
		Policies: map[string]tool.Policy{"sql_lookup": {BatchWindow: time.Second, BatchMax: 4}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	skus := []string{"A1", "B2", "C3", "Z9"}
	results := make([]string, len(skus))
	var wg sync.WaitGroup
	for i, sku := range skus {
		wg.Go(func() {
			result, err := pool.Call(context.Background(), "sql_lookup", json.RawMessage(`{"key":"`+sku+`"}`))
			if err != nil {
				result = err.Error()
			}
			results[i] = result
		})
	}
	wg.Wait()
	for _, r := range results {
		fmt.Println(r)
	}
	st := pool.Stats()[0]
	fmt.Printf("requested %d, executed %d, batches %d\n", st.Requested, st.Executed, st.Batches)
	// Output:
	// {"name":"Widget","price":2.5}
	// {"name":"Gadget","price":10}
	// {"name":"Gizmo","price":null}
	// tool sql_lookup: no row in products with sku = "Z9"
	// requested 4, executed 1, batches 1
}
