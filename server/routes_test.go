package server_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// TestRoutes pins the answers to every route, wrong methods and unknown
// paths: their status, error body and headers, and the route each is
// instrumented under. A wrong method on a gateway route is 405; on the
// Batch API, 404 (after the owner check of the id in the path, as
// OpenAI's API answers).
func TestRoutes(t *testing.T) {
	var mu sync.Mutex
	var route string // the route of the last request, as instrumented
	instrument := func(r string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			route = r
			mu.Unlock()
			h.ServeHTTP(w, req)
		})
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") })
	keys := []server.Key{{Name: "test", SHA256: server.HashKey(testKey)}}
	backends := map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}}
	gateways := map[string]*gateway{
		"plain":   newGateway(t, server.Config{Backends: backends, Keys: keys, Instrument: instrument}),
		"metrics": newGateway(t, server.Config{Backends: backends, Keys: keys, Instrument: instrument, Metrics: metrics}),
		"batches": newGateway(t, server.Config{Backends: backends, Keys: keys, Instrument: instrument, Batches: openStore(t, t.TempDir())}),
	}
	f, err := gateways["batches"].client(testKey).Files.New(t.Context(), openai.FileNewParams{
		File: openai.File(bytes.NewReader(batchInput(1, nil)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	mine := f.ID

	const (
		notFound   = `{"error":{"message":"no such endpoint","type":"invalid_request_error","param":null,"code":"not_found"}}` + "\n"
		method     = `{"error":{"message":"method not allowed","type":"invalid_request_error","param":null,"code":"method_not_allowed"}}` + "\n"
		noStore    = `{"error":{"message":"the Batch API is not enabled on this server (no data directory)","type":"invalid_request_error","param":null,"code":"not_found"}}` + "\n"
		auth       = `{"error":{"message":"incorrect or missing API key: send it as \"Authorization: Bearer KEY\"","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}` + "\n"
		noFile     = `{"error":{"message":"no file with id \"file-x\"","type":"invalid_request_error","param":null,"code":"not_found"}}` + "\n"
		noBatch    = `{"error":{"message":"no batch with id \"batch_x\"","type":"invalid_request_error","param":null,"code":"not_found"}}` + "\n"
		anyBody    = "*"
		noKey      = "-"
		jsonType   = "application/json"
		textType   = "text/plain; charset=utf-8"
		closeConn  = "close"
		keepAlive  = ""
		notChecked = "?"
	)
	for _, tc := range []struct {
		gateway, method, path, key string
		status                     int
		body, contentType, conn    string
		route                      string
	}{
		{"plain", "GET", "/nope", testKey, 404, notFound, jsonType, keepAlive, "other"},
		{"plain", "POST", "/", testKey, 404, notFound, jsonType, keepAlive, "other"},
		{"plain", "GET", "/v1/chat/completions/", testKey, 404, notFound, jsonType, keepAlive, "other"},
		{"plain", "GET", "/v1/filesx", testKey, 404, notFound, jsonType, keepAlive, "other"},
		{"plain", "GET", "//health", testKey, 404, notFound, jsonType, keepAlive, "other"},
		{"plain", "GET", "/v1/../health", testKey, 404, notFound, jsonType, keepAlive, "other"},
		{"plain", "GET", "/health", noKey, 200, "ok\n", textType, keepAlive, "/health"},
		{"plain", "HEAD", "/health", noKey, 200, "", textType, keepAlive, "/health"},
		{"plain", "POST", "/health", noKey, 405, method, jsonType, keepAlive, "/health"},
		{"plain", "GET", "/ready", noKey, 200, "ready\n", textType, keepAlive, "/ready"},
		{"plain", "DELETE", "/ready", noKey, 405, method, jsonType, keepAlive, "/ready"},
		{"plain", "GET", "/v1/models", testKey, 200, anyBody, jsonType, keepAlive, "/v1/models"},
		{"plain", "GET", "/v1/models", noKey, 401, auth, jsonType, closeConn, "/v1/models"},
		{"plain", "POST", "/v1/models", noKey, 405, method, jsonType, keepAlive, "/v1/models"},
		{"plain", "GET", "/v1/chat/completions", testKey, 405, method, jsonType, keepAlive, "/v1/chat/completions"},
		{"plain", "PUT", "/v1/chat/completions", noKey, 405, method, jsonType, keepAlive, "/v1/chat/completions"},
		{"plain", "GET", "/metrics", noKey, 404, notFound, jsonType, keepAlive, "/metrics"},
		{"plain", "POST", "/metrics", noKey, 404, notFound, jsonType, keepAlive, "/metrics"},
		{"metrics", "GET", "/metrics", noKey, 200, "metrics\n", notChecked, keepAlive, "/metrics"},
		{"metrics", "POST", "/metrics", noKey, 405, method, jsonType, keepAlive, "/metrics"},
		{"plain", "GET", "/v1/files", testKey, 404, noStore, jsonType, keepAlive, "/v1/files"},
		{"plain", "POST", "/v1/batches/batch_x/cancel", noKey, 404, noStore, jsonType, keepAlive, "/v1/batches"},
		{"plain", "DELETE", "/v1/files/a/b/c/d", testKey, 404, noStore, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files", noKey, 401, auth, jsonType, closeConn, "/v1/files"},
		{"batches", "PUT", "/v1/batches/batch_x", noKey, 401, auth, jsonType, closeConn, "/v1/batches"},
		{"batches", "GET", "/v1/files", testKey, 200, anyBody, jsonType, keepAlive, "/v1/files"},
		{"batches", "HEAD", "/v1/files", testKey, 404, "", jsonType, keepAlive, "/v1/files"},
		{"batches", "HEAD", "/v1/files/file-x", testKey, 404, "", jsonType, keepAlive, "/v1/files"},
		{"plain", "HEAD", "/v1/models", testKey, 200, "", jsonType, keepAlive, "/v1/models"},
		{"batches", "PUT", "/v1/files", testKey, 404, notFound, jsonType, keepAlive, "/v1/files"},
		{"batches", "DELETE", "/v1/batches", testKey, 404, notFound, jsonType, keepAlive, "/v1/batches"},
		{"batches", "GET", "/v1/files/file-x", testKey, 404, noFile, jsonType, keepAlive, "/v1/files"},
		{"batches", "PUT", "/v1/files/file-x", testKey, 404, noFile, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files/file-x/content", testKey, 404, noFile, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files/file-x/other", testKey, 404, noFile, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files/" + mine, testKey, 200, anyBody, jsonType, keepAlive, "/v1/files"},
		{"batches", "PUT", "/v1/files/" + mine, testKey, 404, notFound, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files/" + mine + "/content", testKey, 200, string(batchInput(1, nil)), "application/octet-stream", keepAlive, "/v1/files"},
		{"batches", "POST", "/v1/files/" + mine + "/content", testKey, 404, notFound, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files/" + mine + "/other", testKey, 404, notFound, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/files/" + mine + "/content/more", testKey, 404, notFound, jsonType, keepAlive, "/v1/files"},
		{"batches", "GET", "/v1/batches/batch_x", testKey, 404, noBatch, jsonType, keepAlive, "/v1/batches"},
		{"batches", "POST", "/v1/batches/batch_x/cancel", testKey, 404, noBatch, jsonType, keepAlive, "/v1/batches"},
		{"batches", "GET", "/v1/batches/batch_x/cancel", testKey, 404, noBatch, jsonType, keepAlive, "/v1/batches"},
		{"batches", "GET", "/v1/batches/a/b/c", testKey, 404, notFound, jsonType, keepAlive, "/v1/batches"},
		{"batches", "GET", "/v1/batches?limit=0", testKey, 400, `{"error":{"message":"limit must be an integer from 1 to 10000","type":"invalid_request_error","param":"limit","code":"invalid_value"}}` + "\n", jsonType, keepAlive, "/v1/batches"},
	} {
		t.Run(tc.gateway+" "+tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, gateways[tc.gateway].url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != noKey {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			// The client must not clean the path: send it as written.
			req.URL.Opaque = strings.SplitN(tc.path, "?", 2)[0]
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := route
			route = ""
			mu.Unlock()
			if resp.StatusCode != tc.status || (tc.body != anyBody && string(body) != tc.body) {
				t.Errorf("answer %d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
			h := resp.Header
			if tc.contentType != notChecked && h.Get("Content-Type") != tc.contentType {
				t.Errorf("Content-Type %q, want %q", h.Get("Content-Type"), tc.contentType)
			}
			if resp.Close != (tc.conn == closeConn) {
				t.Errorf("connection closed %v, want %v", resp.Close, tc.conn == closeConn)
			}
			if h.Get("X-Request-Id") == "" || h.Get("Allow") != "" || h.Get("Location") != "" {
				t.Errorf("X-Request-Id %q, Allow %q, Location %q; want an id, no Allow, no Location", h.Get("X-Request-Id"), h.Get("Allow"), h.Get("Location"))
			}
			if got != tc.route {
				t.Errorf("instrumented as %q, want %q", got, tc.route)
			}
		})
	}
}
