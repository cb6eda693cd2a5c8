package httptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/httptool"
)

func ExampleGet() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"green"}`)
	}))
	defer srv.Close()

	// The test server listens on 127.0.0.1, a loopback address: only a test
	// needs AllowPrivate. A real configuration names public hosts, such as
	// "api.example.com" or "*.example.com".
	httpGet, err := httptool.Get(httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := tool.NewPool([]tool.Tool{httpGet}, tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, u := range []string{srv.URL + "/health", "https://example.com/", "file:///etc/passwd"} {
		args, _ := json.Marshal(map[string]string{"url": u})
		result, err := pool.Call(ctx, "http_get", args)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(result)
	}
	// Output:
	// HTTP 200 OK
	// Content-Type: application/json
	//
	// {"status":"green"}
	// tool http_get: url "https://example.com/": host "example.com" is not allowed; allowed hosts: 127.0.0.1
	// tool http_get: url "file:///etc/passwd": scheme "file" is not allowed; only http and https URLs are
}
