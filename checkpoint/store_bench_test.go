package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// benchState is the final state of a typical one-turn agent (~600 bytes
// of JSON).
func benchState(idx int) agent.State {
	return agent.State{
		JobID:  "bench",
		Index:  idx,
		Input:  job.Input{"text": "The quick brown fox jumps over the lazy dog."},
		Status: agent.StatusDone,
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Classify the sentiment of: The quick brown fox jumps over the lazy dog."},
			{Role: llm.RoleAssistant, Content: `{"sentiment":"neutral","confidence":0.82}`},
		},
		Turns:      1,
		ModelCalls: 1,
		Usage:      llm.Usage{PromptTokens: 412, CompletionTokens: 17},
		Timings:    agent.Timings{Inference: 40 * time.Millisecond, TTFT: 12 * time.Millisecond},
		Output:     json.RawMessage(`{"sentiment":"neutral","confidence":0.82}`),
	}
}

// benchToolState is the final state of an agent that called tools over
// three turns (~1.4 KB of JSON): its tool calls' arguments are embedded
// raw, one of them with a character that HTML escaping rewrites.
func benchToolState(idx int) agent.State {
	st := benchState(idx)
	args := []string{
		`{"path": "docs/report-2024.txt", "max_bytes": 4096}`,
		`{"query": "quarterly revenue by region", "limit": 10, "filters": {"year": 2024, "currency": "EUR"}}`,
		`{"sql": "SELECT name FROM t WHERE a > 1 & b < 2"}`,
	}
	msgs := []llm.Message{st.Messages[0]}
	for i, a := range args {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "lookup", Arguments: json.RawMessage(a)}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "lookup", Content: "42 rows"})
	}
	st.Messages = append(msgs, st.Messages[1])
	st.Turns, st.ModelCalls, st.ToolCalls = 4, 4, 3
	return st
}

// BenchmarkSave measures saves from many goroutines at once, as an engine
// running thousands of agents makes them, and reports saves/s.
func BenchmarkSave(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  checkpoint.Config
		par  int // savers per GOMAXPROCS
	}{
		{"savers=1/window=none", checkpoint.Config{FlushInterval: -1}, 0},
		{"savers=1/window=5ms", checkpoint.Config{}, 0},
		{"savers=256/window=none", checkpoint.Config{FlushInterval: -1}, 128},
		{"savers=256/window=5ms", checkpoint.Config{}, 128},
		{"savers=2048/window=5ms", checkpoint.Config{}, 1024},
		{"savers=256/window=5ms/spans", checkpoint.Config{}, 128},
	} {
		state := benchState
		if strings.HasSuffix(bc.name, "/spans") { // as the engine saves them now
			state = func(idx int) agent.State { return withSpans(benchState(idx)) }
		}
		b.Run(bc.name, func(b *testing.B) {
			s, err := checkpoint.Open(filepath.Join(b.TempDir(), "run.db"), bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			var next atomic.Int64
			start := time.Now()
			if bc.par == 0 {
				for b.Loop() {
					if err := s.Save(b.Context(), state(int(next.Add(1)))); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(bc.par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := s.Save(b.Context(), state(int(next.Add(1)))); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(next.Load())/time.Since(start).Seconds(), "saves/s")
		})
	}
}

// BenchmarkEncodeState compares encoding a final state with encoding/json
// and with the store's encoder.
func BenchmarkEncodeState(b *testing.B) {
	st := benchState(12345)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := json.NewEncoder(&buf).Encode(&st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendState", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = checkpoint.AppendState(buf[:0], &st); err != nil {
				b.Fatal(err)
			}
		}
	})
	tools := benchToolState(12345)
	b.Run("appendState/tool-calls", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = checkpoint.AppendState(buf[:0], &tools); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As the engine saves them: with the agent's start and a span per turn.
	spans := withSpans(benchState(12345))
	toolSpans := withSpans(benchToolState(12345))
	for _, bc := range []struct {
		name string
		st   *agent.State
	}{{"appendState/spans", &spans}, {"appendState/tool-calls+spans", &toolSpans}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = checkpoint.AppendState(buf[:0], bc.st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// withSpans returns st with a start and one span per turn, as the engine
// records them (times in the local zone, with nanoseconds).
func withSpans(st agent.State) agent.State {
	st.Started = time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.Local)
	at := st.Started
	for turn := range st.Turns {
		sp := job.Span{Turn: turn, Start: at, Queue: 3 * time.Millisecond, Inference: 40 * time.Millisecond, TTFT: 15 * time.Millisecond}
		if turn < st.ToolCalls {
			sp.Tools = 7 * time.Millisecond
		}
		st.Spans = append(st.Spans, sp)
		at = sp.End()
	}
	return st
}

// BenchmarkAddSample measures one sample's round trip through the
// group-commit writer with no saves to share its transaction: the cost of
// the samples a run records once a second.
func BenchmarkAddSample(b *testing.B) {
	s, err := checkpoint.Open(filepath.Join(b.TempDir(), "run.db"), checkpoint.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := json.RawMessage(`{"done":51234,"in_flight":512,"limit":480,"rate_limited":3,"tokens":{"prompt":21093412,"completion":1203344}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AddSample(b.Context(), "bench", checkpoint.Sample{At: time.Now(), Data: data}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadLongConversations loads 1 000 final states with 100 KB of
// tool results each (100 MB of JSON), as resuming a large run does, and
// reports the heap Load keeps and its read speed.
func BenchmarkLoadLongConversations(b *testing.B) {
	s, err := checkpoint.Open(filepath.Join(b.TempDir(), "run.db"), checkpoint.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	doc := strings.Repeat(`{"line": "a \"quoted\" word, a [bracket] and a \\ backslash"}, `, 20<<10/64)
	var size int64
	for i := range n {
		st := benchState(i)
		for k := range 5 {
			st.Messages = append(st.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: "c", Content: fmt.Sprint(i, k, doc)})
		}
		line, _ := checkpoint.AppendState(nil, &st)
		size += int64(len(line))
		if err := s.Save(b.Context(), st); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var kept uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		states, err := s.Load(b.Context(), "bench")
		if err != nil || len(states) != n {
			b.Fatalf("Load = %d states, %v", len(states), err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
		runtime.KeepAlive(states)
	}
	b.ReportMetric(float64(kept)/(1<<20), "MB-kept")
}
