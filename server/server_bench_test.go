package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/server"
)

const benchBody = `{"model":"sim","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`

// post sends benchBody to url and reads the answer.
func post(b *testing.B, c *http.Client, url string) {
	resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(benchBody))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkGateway compares a streamed chat completion sent to the HTTP simulator
// directly with one sent through the gateway in front of it: the
// difference per op is the latency the gateway adds (one more HTTP hop,
// decoding, admission, encoding).
func BenchmarkGateway(b *testing.B) {
	cfg := simhttp.Config{Model: sim.Config{Seed: 1, ToolTurns: -1}, PrefillPerToken: time.Nanosecond, DecodeStep: time.Microsecond, DecodeStepPerSeq: time.Nanosecond}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Run("direct", func(b *testing.B) {
		_, url := simHTTP(b, cfg)
		b.ReportAllocs()
		for b.Loop() {
			post(b, c, url)
		}
	})
	b.Run("gateway", func(b *testing.B) {
		_, url := simHTTP(b, cfg)
		g := newGateway(b, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: openaiBackend(b, url, ""), Name: "sim"}}})
		b.ReportAllocs()
		for b.Loop() {
			post(b, c, g.url)
		}
	})
}
