package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.uber.org/goleak"

	"github.com/batchagent/batchagent"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testKey is the API key the test clients present.
const testKey = "sk-gateway-test-key"

// gateway is a Server on an httptest server, with its engine.
type gateway struct {
	srv    *server.Server
	engine *batchagent.Engine
	url    string // the httptest server's URL
}

// newGateway starts a gateway over cfg (its Engine filled in when nil)
// and stops it when the test ends.
func newGateway(t testing.TB, cfg server.Config) *gateway {
	t.Helper()
	if cfg.Engine == nil {
		e, err := batchagent.New(batchagent.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Engine = e
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &gateway{srv: s, engine: cfg.Engine, url: hs.URL}
}

// client returns the official OpenAI client pointed at g, without retries.
func (g *gateway) client(key string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(g.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

func newSim(t *testing.T, cfg sim.Config) *sim.Model {
	t.Helper()
	m, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// simGateway is a gateway with one key and the in-process simulator as
// model "sim" (answering without tools unless toolTurns > 0).
func simGateway(t *testing.T, toolTurns int) *gateway {
	t.Helper()
	m := newSim(t, sim.Config{Seed: 7, ToolTurns: toolTurns})
	return newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}},
		Keys:     []server.Key{{Name: "test", SHA256: server.HashKey(testKey)}},
	})
}

func userParams(model, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(text)},
	}
}

func TestPassthrough(t *testing.T) {
	g := simGateway(t, -1)
	c := g.client(testKey)
	ctx := t.Context()

	resp, err := c.Chat.Completions.New(ctx, userParams("sim", "Say hello."))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("New = %+v, want one choice with content and finish stop", resp.Choices)
	}
	if resp.Object != "chat.completion" || resp.Model != "sim" || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Errorf("New: object %q model %q id %q, want chat.completion, sim, chatcmpl-…", resp.Object, resp.Model, resp.ID)
	}
	if resp.Usage.PromptTokens <= 0 || resp.Usage.CompletionTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("New: usage %+v, want counted tokens and their total", resp.Usage)
	}

	// The same request streamed gives the same answer, in chunks.
	p := userParams("sim", "Say hello.")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var (
		acc    openai.ChatCompletionAccumulator
		chunks []openai.ChatCompletionChunk
	)
	for stream.Next() {
		chunks = append(chunks, stream.Current())
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(chunks) < 4 {
		t.Fatalf("stream: %d chunks, want role, content, finish and usage", len(chunks))
	}
	if d := chunks[0].Choices[0].Delta; d.Role != "assistant" || d.Content != "" {
		t.Errorf("first chunk delta = %+v, want the role chunk", d)
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage.TotalTokens != resp.Usage.TotalTokens {
		t.Errorf("last chunk = choices %v usage %+v, want no choices and usage %+v", last.Choices, last.Usage, resp.Usage)
	}
	if fin := chunks[len(chunks)-2].Choices[0].FinishReason; fin != "stop" {
		t.Errorf("finish chunk reason = %q, want stop", fin)
	}
	if got, want := acc.Choices[0].Message.Content, resp.Choices[0].Message.Content; got != want {
		t.Errorf("streamed content = %q, want %q (as not streamed)", got, want)
	}
}

// TestStreamWire checks the SSE bytes themselves: data lines only, a null
// usage on every chunk of a stream that asked for usage, and [DONE] last.
func TestStreamWire(t *testing.T) {
	g := simGateway(t, -1)
	body := `{"model":"sim","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d content type %q, want 200 text/event-stream", resp.StatusCode, ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	if n := len(lines); n < 4 || lines[n-1] != "data: [DONE]" {
		t.Fatalf("stream lines = %q, want chunks then data: [DONE]", lines)
	}
	for i, l := range lines[:len(lines)-1] {
		var c map[string]json.RawMessage
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &c); err != nil || !strings.HasPrefix(l, "data: ") {
			t.Fatalf("line %d = %q, want a data line of JSON", i, l)
		}
		if _, ok := c["usage"]; !ok || string(c["object"]) != `"chat.completion.chunk"` {
			t.Errorf("line %d = %s, want a chat.completion.chunk with a usage field", i, l)
		}
		if i < len(lines)-2 && string(c["usage"]) != "null" {
			t.Errorf("line %d usage = %s, want null before the usage chunk", i, c["usage"])
		}
	}
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Weather of a city."),
	Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
})

func TestPassthroughToolCalls(t *testing.T) {
	g := simGateway(t, 1)
	c := g.client(testKey)
	p := userParams("sim", "Weather in Paris?")
	p.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}

	resp, err := c.Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	msg := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
		t.Fatalf("New = finish %q calls %+v, want one tool call", resp.Choices[0].FinishReason, msg.ToolCalls)
	}
	call := msg.ToolCalls[0]
	var args struct{ City string }
	if call.Function.Name != "get_weather" || call.ID == "" || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil || args.City == "" {
		t.Errorf("tool call = %+v, want get_weather with an id and a city", call)
	}

	stream := c.Chat.Completions.NewStreaming(t.Context(), p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	got := acc.Choices[0].Message.ToolCalls
	if acc.Choices[0].FinishReason != "tool_calls" || len(got) != 1 || got[0].Function.Name != call.Function.Name || got[0].Function.Arguments != call.Function.Arguments {
		t.Errorf("streamed: finish %q calls %+v, want %+v", acc.Choices[0].FinishReason, got, call)
	}

	// The tool's result goes back, and the model answers.
	p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage(`{"temp":21}`, call.ID))
	resp, err = c.Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatalf("New after the tool result: %v", err)
	}
	if resp.Choices[0].FinishReason != "stop" || resp.Choices[0].Message.Content == "" {
		t.Errorf("after the tool result: %+v, want an answer", resp.Choices[0])
	}
}

func TestPassthroughJSONSchema(t *testing.T) {
	g := simGateway(t, -1)
	p := userParams("sim", "Rate this.")
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
			Name:   "rating",
			Schema: map[string]any{"type": "object", "properties": map[string]any{"score": map[string]any{"type": "integer", "minimum": 1, "maximum": 5}}, "required": []string{"score"}},
		},
	}}
	resp, err := g.client(testKey).Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var out struct {
		Score *int `json:"score"`
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &out); err != nil || out.Score == nil || *out.Score < 1 || *out.Score > 5 {
		t.Errorf("content %q, want a JSON object with a score in [1, 5] (%v)", resp.Choices[0].Message.Content, err)
	}
}

// recorder is a server.Recorder that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	calls   []error
	results map[string][]batchagent.Result
}

func (r *recorder) Call(model string, ttft, total time.Duration, usage llm.Usage, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, err)
}

func (r *recorder) Result(agent string, res batchagent.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.results == nil {
		r.results = map[string][]batchagent.Result{}
	}
	r.results[agent] = append(r.results[agent], res)
}

func TestAgentMode(t *testing.T) {
	var toolArgs []string
	var mu sync.Mutex
	lookup := tool.Func(tool.Spec{
		Name:        "lookup",
		Description: "Look up a word.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`),
	}, func(ctx context.Context, args json.RawMessage) (string, error) {
		mu.Lock()
		toolArgs = append(toolArgs, string(args))
		mu.Unlock()
		return `{"meaning":"a greeting"}`, nil
	})
	m := newSim(t, sim.Config{Seed: 3, ToolTurns: 1})
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID: "reviewer", Model: m, ModelName: "sim", Priority: batchagent.Interactive,
		Task:         "Review: {input}",
		Tools:        []tool.Tool{lookup},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	g := newGateway(t, server.Config{Agents: map[string]*batchagent.Spec{"reviewer": spec}, Recorder: rec,
		Prices: map[string]server.Price{"agent:reviewer": {Input: 1, Output: 2}}})
	c := g.client("")

	p := userParams("agent:reviewer", "hello world")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(t.Context(), p)
	var (
		acc    openai.ChatCompletionAccumulator
		events []server.Event
		usage  openai.CompletionUsage
	)
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if ch.JSON.Usage.Valid() {
			usage = ch.Usage
		}
		if len(ch.Choices) == 0 {
			continue
		}
		if f, ok := ch.Choices[0].Delta.JSON.ExtraFields["batchagent_event"]; ok {
			var e server.Event
			if err := json.Unmarshal([]byte(f.Raw()), &e); err != nil {
				t.Fatalf("batchagent_event %s: %v", f.Raw(), err)
			}
			events = append(events, e)
			if ch.Choices[0].Delta.Content != "" {
				t.Errorf("a reasoning chunk carries content %q", ch.Choices[0].Delta.Content)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if want := "turn tool_call tool_result turn"; strings.Join(types, " ") != want {
		t.Fatalf("events %q, want %q", types, want)
	}
	if events[1].Tool != "lookup" || !json.Valid(events[1].Arguments) || events[2].Summary != `{"meaning":"a greeting"}` {
		t.Errorf("tool events = %+v %+v, want lookup's call and result", events[1], events[2])
	}
	if len(toolArgs) != 1 {
		t.Errorf("the tool ran %d times, want 1", len(toolArgs))
	}
	var out struct{ Verdict *string }
	content := acc.Choices[0].Message.Content
	if json.Unmarshal([]byte(content), &out) != nil || out.Verdict == nil {
		t.Errorf("content %q, want the agent's JSON answer", content)
	}
	rec.mu.Lock()
	res := rec.results["reviewer"]
	rec.mu.Unlock()
	if len(res) != 1 || res[0].Turns != 2 || res[0].Err != nil {
		t.Fatalf("recorded results %+v, want one two-turn success", res)
	}
	if usage.PromptTokens != res[0].Usage.PromptTokens || usage.CompletionTokens != res[0].Usage.CompletionTokens || usage.PromptTokens == 0 {
		t.Errorf("usage chunk %+v, want the sum of both turns %+v", usage, res[0].Usage)
	}
	var cost float64
	if err := json.Unmarshal([]byte(usage.JSON.ExtraFields["cost"].Raw()), &cost); err != nil ||
		cost != float64(res[0].Usage.PromptTokens+2*res[0].Usage.CompletionTokens)/1e6 {
		t.Errorf("usage cost = %v (%v), want (prompt + 2 × completion) / 1e6 for %+v", cost, err, res[0].Usage)
	}

	// Not streamed: the same answer shape, the steps in the message.
	resp, err := c.Chat.Completions.New(t.Context(), userParams("agent:reviewer", `{"input":"hi there"}`))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	raw := resp.Choices[0].Message.JSON.ExtraFields["batchagent_events"]
	var steps []server.Event
	if err := json.Unmarshal([]byte(raw.Raw()), &steps); err != nil || len(steps) != 4 {
		t.Errorf("batchagent_events = %s, want 4 steps (%v)", raw.Raw(), err)
	}
	if resp.Usage.TotalTokens <= 0 {
		t.Errorf("usage %+v, want tokens", resp.Usage)
	}
}

// TestConcurrentClients runs two streams at once.
func TestConcurrentClients(t *testing.T) {
	g := simGateway(t, -1)
	var wg sync.WaitGroup
	got := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			stream := g.client(testKey).Chat.Completions.NewStreaming(t.Context(), userParams("sim", "Say hello."))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			errs[i] = stream.Err()
			if len(acc.Choices) > 0 {
				got[i] = acc.Choices[0].Message.Content
			}
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || got[i] == "" {
			t.Errorf("client %d: content %q error %v, want an answer", i, got[i], errs[i])
		}
	}
	if got[0] != got[1] {
		t.Errorf("the same request gave %q and %q", got[0], got[1])
	}
	if s := g.engine.Stats(); s.Inflight != 0 {
		t.Errorf("Inflight = %d after both, want 0", s.Inflight)
	}
}

// TestModelsHealthReady lists the models and checks the probes.
func TestModelsHealthReady(t *testing.T) {
	m := newSim(t, sim.Config{})
	spec, err := batchagent.NewSpec(batchagent.Def{Model: m, Task: "{input}"})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"b": {Model: m}, "a": {Model: m}},
		Agents:   map[string]*batchagent.Spec{"rev": spec},
	})
	page, err := g.client("").Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if got, want := strings.Join(ids, " "), "a b agent:rev"; got != want {
		t.Errorf("models = %q, want %q", got, want)
	}
	for _, path := range []string{"/health", "/ready"} {
		resp, err := http.Get(g.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d, want 200", path, resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := g.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(g.url + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /ready after Shutdown = %d, want 503", resp.StatusCode)
	}
	_, err = g.client("").Chat.Completions.New(t.Context(), userParams("a", "hi"))
	if ae, ok := errors.AsType[*openai.Error](err); !ok || ae.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a completion after Shutdown: %v, want 503", err)
	}
}

// simHTTP starts the HTTP simulator with cfg and returns its URL and the
// server.
func simHTTP(t testing.TB, cfg simhttp.Config) (*simhttp.Server, string) {
	t.Helper()
	srv, err := simhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); cancel(); wg.Wait() })
	return srv, hs.URL
}

// openaiBackend is our openai client pointed at an OpenAI-compatible URL.
func openaiBackend(t testing.TB, url string, key llm.Secret) *backendopenai.Model {
	t.Helper()
	m, err := backendopenai.New(backendopenai.Config{BaseURL: url + "/v1", Flavor: backendopenai.FlavorSim, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDisconnect: a client that leaves mid-stream stops the upstream
// request (the simulator's sequence leaves its batch) and frees the slot.
func TestDisconnect(t *testing.T) {
	up, url := simHTTP(t, simhttp.Config{Model: sim.Config{Seed: 1, ToolTurns: -1}, DecodeStep: 20 * time.Millisecond, PrefillPerToken: time.Microsecond})
	g := newGateway(t, server.Config{Backends: map[string]batchagent.Backend{"sim": {Model: openaiBackend(t, url, ""), Name: "sim"}}})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := g.client("").Chat.Completions.NewStreaming(ctx, userParams("sim", "Tell a long story."))
	sawText := false
	for stream.Next() {
		if len(stream.Current().Choices) > 0 && stream.Current().Choices[0].Delta.Content != "" {
			sawText = true
			break
		}
	}
	if !sawText {
		t.Fatalf("no content before the disconnect: %v", stream.Err())
	}
	if s := up.Stats(); s.Running != 1 {
		t.Fatalf("upstream running = %d mid-stream, want 1", s.Running)
	}
	if n := g.engine.Stats().Inflight; n != 1 {
		t.Fatalf("engine Inflight = %d mid-stream, want 1 (the call holds a slot)", n)
	}
	left := time.Now()
	cancel()
	stream.Close()
	deadline := left.Add(2 * time.Second)
	for up.Stats().Running != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling, not timing
	}
	if took := time.Since(left); up.Stats().Running != 0 || took > 100*time.Millisecond {
		t.Errorf("upstream still running %v after the disconnect (running %d), want stopped within 100ms", took, up.Stats().Running)
	} else {
		t.Logf("upstream stopped %v after the disconnect", took)
	}
	for g.engine.Stats().Inflight != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := g.engine.Stats().Inflight; n != 0 {
		t.Errorf("engine Inflight = %d after the disconnect, want 0 (slot freed)", n)
	}
}

// ttftRecorder is a server.Recorder that keeps each call's time to first
// token.
type ttftRecorder struct {
	mu    sync.Mutex
	ttfts []time.Duration
}

func (r *ttftRecorder) Call(model string, ttft, total time.Duration, usage llm.Usage, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ttfts = append(r.ttfts, ttft)
}

func (r *ttftRecorder) Result(string, batchagent.Result) {}

// TestPassthroughTTFTExcludesSlotWait: a passthrough call's time to first
// token runs from its admission, not from its arrival: with one slot and
// four calls at once on a model taking 150 ms a forward pass, the last
// waits ~450 ms for the slot, and every TTFT stays near 150 ms (it was
// up to ~600 ms, the slot wait included).
func TestPassthroughTTFTExcludesSlotWait(t *testing.T) {
	const latency = 150 * time.Millisecond
	m := newSim(t, sim.Config{Seed: 7, ToolTurns: -1, Latency: latency})
	rec := &ttftRecorder{}
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Engine:   e,
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}},
		Keys:     []server.Key{{Name: "test", SHA256: server.HashKey(testKey)}},
		Recorder: rec,
	})
	c := g.client(testKey)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := c.Chat.Completions.New(t.Context(), userParams("sim", "Say hello.")); err != nil {
				t.Errorf("New: %v", err)
			}
		})
	}
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ttfts) != 4 {
		t.Fatalf("%d calls recorded, want 4", len(rec.ttfts))
	}
	for i, d := range rec.ttfts {
		if d < latency || d > latency+200*time.Millisecond {
			t.Errorf("call %d: TTFT %v, want about %v (from its admission, not its arrival)", i, d, latency)
		}
	}
}
