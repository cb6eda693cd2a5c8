package batchagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// BenchmarkAgentMemory measures what one agent holds while it is in
// flight. Each round runs n agents of the workload of `batchagent bench
// fair` at once on the simulator: a turn that reads a shared document
// with a tool, then an answer of outSchema. The agents' tool calls
// coalesce into one execution, which waits until all n have called, then
// reads runtime.MemStats after a collection and lets them go on. It
// reports, per agent, the goroutine stack bytes (StackInuse) and the live
// heap bytes (HeapAlloc) above what was in use before the round: the
// engine keeps an agent's goroutine at a 4 KB stack (stack-B/agent about
// 4096; 8192 means every agent's stack grew once more).
//
// The openai cases run the same agents through the OpenAI backend against
// the HTTP simulator (one sequence per agent, no queue limit): what an
// agent holds on a real server, where its goroutine has streamed an
// answer over HTTP before it waits. The backend's call runs on a stack of
// its own (llm.OnOwnStack): without it the agent's goroutine kept 9–11 KB.
// The anthropic cases do the same through the Anthropic backend, against
// a server that streams the Messages API's events: 0.9–3.7 KB of stack per
// agent, against 8.5–9.8 KB with the SDK's call on the agent's goroutine.
// The bedrock cases do it through the Bedrock backend and ConverseStream's
// event stream: 0.4–3.6 KB, against 9.0–10.3 KB.
func BenchmarkAgentMemory(b *testing.B) {
	for _, n := range []int{200, 10_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			m, err := sim.New(sim.Config{Latency: 60 * time.Millisecond, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			benchAgentMemory(b, m, n)
		})
	}
	for _, n := range []int{200, 2_000} {
		b.Run(fmt.Sprintf("openai/n=%d", n), func(b *testing.B) {
			benchAgentMemory(b, simOpenAI(b, n), n)
		})
	}
	for _, n := range []int{200, 2_000} {
		b.Run(fmt.Sprintf("anthropic/n=%d", n), func(b *testing.B) {
			benchAgentMemory(b, fakeAnthropic(b), n)
		})
	}
	for _, n := range []int{200, 2_000} {
		b.Run(fmt.Sprintf("bedrock/n=%d", n), func(b *testing.B) {
			benchAgentMemory(b, fakeBedrock(b), n)
		})
	}
}

// fakeBedrock returns the Bedrock backend on a server that speaks
// ConverseStream's event stream: a first turn calls read_file, a turn
// after a tool result answers through the output tool (the last tool the
// request names). The server is stopped when b ends.
func fakeBedrock(b *testing.B) llm.Model {
	frame := backendtest.EventFrame
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			ToolConfig struct {
				Tools []struct {
					ToolSpec struct {
						Name string `json:"name"`
					} `json:"toolSpec"`
				} `json:"tools"`
			} `json:"toolConfig"`
		}
		if !strings.HasSuffix(r.URL.Path, "/converse-stream") || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.ToolConfig.Tools) == 0 || len(req.Messages) == 0 {
			http.Error(w, `{"message":"bad request"}`, http.StatusBadRequest)
			return
		}
		name, input := "read_file", `{"path":"doc.txt"}`
		if bytes.Contains(req.Messages[len(req.Messages)-1].Content, []byte(`"toolResult"`)) {
			input = `{"value":1,"first_word":"Batch"}`
			for _, t := range req.ToolConfig.Tools { // the last named one: a cache point may follow
				if t.ToolSpec.Name != "" {
					name = t.ToolSpec.Name
				}
			}
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		for _, f := range [][]byte{
			frame("messageStart", `{"role":"assistant"}`),
			frame("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t1","name":`+strconv.Quote(name)+`}}}`),
			frame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":`+strconv.Quote(input)+`}}}`),
			frame("contentBlockStop", `{"contentBlockIndex":0}`),
			frame("messageStop", `{"stopReason":"tool_use"}`),
			frame("metadata", `{"usage":{"inputTokens":40,"outputTokens":12,"totalTokens":52},"metrics":{"latencyMs":1}}`),
		} {
			w.Write(f)
			w.(http.Flusher).Flush()
		}
	}))
	b.Cleanup(hs.Close)
	m, err := bedrock.New(b.Context(), bedrock.Config{Endpoint: hs.URL, Region: "us-east-1", Model: "fake",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret", "")})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// fakeAnthropic returns the Anthropic backend on a server that speaks the
// Messages API's stream: a first turn calls read_file, a turn after a tool
// result answers through the output tool (the last tool the request
// offers). The server is stopped when b ends.
func fakeAnthropic(b *testing.B) llm.Model {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if r.URL.Path != "/v1/messages" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Tools) == 0 || len(req.Messages) == 0 {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		name, input := "read_file", `{"path":"doc.txt"}`
		if bytes.Contains(req.Messages[len(req.Messages)-1].Content, []byte(`"tool_result"`)) {
			name, input = req.Tools[len(req.Tools)-1].Name, `{"value":1,"first_word":"Batch"}`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []struct{ typ, data string }{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"fake","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":` + strconv.Quote(name) + `,"input":{}}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + strconv.Quote(input) + `}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.typ, ev.data)
			w.(http.Flusher).Flush()
		}
	}))
	b.Cleanup(hs.Close)
	m, err := anthropic.New(anthropic.Config{BaseURL: hs.URL, APIKey: llm.Secret("test-key"), Model: "fake"})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// simOpenAI returns the OpenAI backend on an HTTP simulator serving n
// sequences at once, both stopped when b ends.
func simOpenAI(b *testing.B, n int) llm.Model {
	// A fast server: memory, not time, is measured.
	srv, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: 1, ToolTurns: 1}, MaxSeqs: n, MaxQueue: -1,
		PrefillPerToken: time.Nanosecond, DecodeStep: 10 * time.Microsecond, DecodeStepPerSeq: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	hs := httptest.NewServer(srv)
	b.Cleanup(func() { hs.Close(); cancel(); wg.Wait() })
	m, err := backendopenai.New(backendopenai.Config{BaseURL: hs.URL + "/v1", Flavor: backendopenai.FlavorSim})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchAgentMemory(b *testing.B, m llm.Model, n int) {
	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"id": strconv.Itoa(i)}
	}
	var stack, heap float64 // per agent, summed over the rounds
	rounds := 0
	for b.Loop() {
		s, h := agentMemoryRound(b, m, inputs)
		stack += s
		heap += h
		rounds++
	}
	b.ReportMetric(stack/float64(rounds), "stack-B/agent")
	b.ReportMetric(heap/float64(rounds), "heap-B/agent")
}

// agentMemoryRound runs one round of BenchmarkAgentMemory over inputs and
// returns the stack and heap bytes per agent while all of them waited for
// the tool.
func agentMemoryRound(b *testing.B, m llm.Model, inputs []batchagent.Input) (stack, heap float64) {
	ctx := b.Context()
	n := len(inputs)
	eng, err := batchagent.New(batchagent.Config{MaxActive: n})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := eng.Shutdown(context.WithoutCancel(ctx)); err != nil {
			b.Error(err)
		}
	}()
	var base, inflight runtime.MemStats
	// A new tool each round: a spec's pool would answer the next round's
	// calls from its cache.
	read := tool.Func(tool.Spec{
		Name:        "read_file",
		Description: "Reads a file.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Cacheable:   true,
	}, func(ctx context.Context, _ json.RawMessage) (string, error) {
		// The one execution: every other call joins it.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for coalesced(eng) < int64(n-1) {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&inflight)
		return "Batch inference is a scheduling problem as much as a modelling one.\n", nil
	})
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID:           "fair",
		Model:        m,
		System:       "You answer questions about documents. Read the document you are given before answering.",
		Task:         "Read the shared document path: doc.txt and report on item {id}.",
		OutputSchema: json.RawMessage(outSchema),
		Tools:        []tool.Tool{read},
	})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&base)
	results, err := eng.Run(ctx, spec, batchagent.Slice(inputs))
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil || r.ToolCalls != 1 {
			b.Fatalf("agent %d: err %v, %d tool calls; want a result after 1 tool call", r.Index, r.Err, r.ToolCalls)
		}
	}
	if inflight.NumGC == 0 {
		b.Fatal("the tool never measured")
	}
	stack = float64(int64(inflight.StackInuse)-int64(base.StackInuse)) / float64(n)
	heap = float64(int64(inflight.HeapAlloc)-int64(base.HeapAlloc)) / float64(n)
	return stack, heap
}

// coalesced returns the calls of eng's tools that joined an execution in
// flight.
func coalesced(eng *batchagent.Engine) int64 {
	var c int64
	for _, t := range eng.Stats().Tools {
		c += t.Coalesced
	}
	return c
}
