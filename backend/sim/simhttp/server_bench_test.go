package simhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// benchRequest is a typical agent request: a 2,000-token shared system
// prompt, one tool, a task.
func benchRequest(b *testing.B) []byte {
	b.Helper()
	body, err := json.Marshal(map[string]any{
		"model": "m",
		"messages": []any{
			map[string]any{"role": "system", "content": strings.Repeat("You review Go code carefully. ", 270)},
			map[string]any{"role": "user", "content": "Review path: pkg/a.go and report."},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "read_file",
			"parameters": json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func BenchmarkChatDecode(b *testing.B) {
	body := benchRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		var cr oaiwire.Request
		if err := json.Unmarshal(body, &cr); err != nil {
			b.Fatal(err)
		}
		if _, _, _, e := decode(&cr); e != nil {
			b.Fatal(e.message)
		}
	}
}

func BenchmarkBlockHashes(b *testing.B) {
	prompt := []byte(strings.Repeat("x", 8192)) // 2,048 tokens
	b.SetBytes(int64(len(prompt)))
	b.ReportAllocs()
	for b.Loop() {
		blockHashes(prompt)
	}
}

func BenchmarkPrefixCacheLookup(b *testing.B) {
	c := newKVCache(DefaultKVCacheTokens / blockTokens)
	blocks := blockHashes([]byte(strings.Repeat("x", 8192)))
	c.reserve(len(blocks))
	for _, h := range blocks {
		c.add(h)
	}
	c.unpin(blocks)
	b.ReportAllocs()
	for b.Loop() {
		if c.pin(blocks, 0) != len(blocks) {
			b.Fatal("miss")
		}
		c.unpin(blocks)
	}
}

// BenchmarkStreamChunks frames a 50-token answer as stream chunks, one
// token at a time.
func BenchmarkStreamChunks(b *testing.B) {
	a := newAnswer(&llm.Response{Message: llm.Message{Content: strings.Repeat("alpha ", 33)}})
	c := newChunker("chatcmpl-1", "m", 1, true)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		sent := 0
		for k := 1; k <= sim.Tokens(a.size); k++ {
			to := a.cursor(k)
			buf = a.appendDeltas(buf[:0], c, sent, to)
			sent = to
		}
	}
}

// BenchmarkServeHTTP measures the server's own cost of a non-streamed
// request end to end (parse, answer, schedule, encode), with the timing
// model's times set to a nanosecond.
func BenchmarkServeHTTP(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			s, err := New(Config{PrefillPerToken: time.Nanosecond, DecodeStep: time.Nanosecond, DecodeStepPerSeq: time.Nanosecond})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			ran := make(chan error, 1) // Run's result
			go func() { ran <- s.Run(ctx) }()
			defer func() {
				cancel()
				<-ran
			}()
			body := string(benchRequest(b))
			if stream {
				body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
			}
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
