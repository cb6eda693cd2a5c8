package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// The tests of this file run the agent on the real openai and anthropic
// clients, against an httptest server that streams scripted SSE answers
// over in-memory connections (net.Pipe), so that the whole HTTP stack runs
// inside a synctest bubble and every instant below is exact.

// step is one piece of a scripted stream: after wait, the server sends an
// SSE event (event may be empty) with data; empty data sends nothing.
type step struct {
	wait        time.Duration
	event, data string
}

// sseServer answers its nth request with scripts[n], one step at a time,
// and records when each stream ended. A script that ends without its
// terminator is a cut stream.
type sseServer struct {
	scripts [][]step
	begin   time.Time

	mu   sync.Mutex      // protects reqs and ends
	reqs int             // requests served
	ends []time.Duration // when each stream ended, since begin
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.reqs
	s.reqs++
	s.mu.Unlock()
	if n >= len(s.scripts) {
		http.Error(w, `{"error":{"message":"no more answers"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	f.Flush()
	for _, st := range s.scripts[n] {
		time.Sleep(st.wait)
		if st.data == "" {
			continue
		}
		if st.event != "" {
			fmt.Fprintf(w, "event: %s\n", st.event)
		}
		fmt.Fprintf(w, "data: %s\n\n", st.data)
		f.Flush()
	}
	s.mu.Lock()
	s.ends = append(s.ends, time.Since(s.begin))
	s.mu.Unlock()
}

// streamEnds returns when the streams served so far ended, since begin.
func (s *sseServer) streamEnds() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ends...)
}

// pipeListener is a net.Listener whose connections are net.Pipes made by
// its dial.
type pipeListener struct {
	conns  chan net.Conn // unbuffered: dial hands the server end to Accept
	closed chan struct{}
	once   sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe.test" }

// serve starts an httptest server for s on in-memory connections and
// returns its URL and a client that reaches it; both are closed when the
// test ends.
func serve(t *testing.T, s *sseServer) (string, *http.Client) {
	t.Helper()
	l := &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	srv := httptest.NewUnstartedServer(s)
	srv.Listener.Close() // the loopback listener it made is not used
	srv.Listener = l
	srv.Start()
	tr := &http.Transport{DialContext: l.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return srv.URL, &http.Client{Transport: tr}
}

// execution is one run of the recording tool (toolLog).
type execution struct {
	args       string
	start, end time.Duration // since the test's begin
	cancelled  bool
}

// toolLog is a tool, "echo", that takes 50ms and records its runs; it
// fails for arguments holding "fail".
type toolLog struct {
	begin time.Time
	mu    sync.Mutex // protects runs
	runs  []execution
}

const toolTime = 50 * time.Millisecond

// earlyDelay is the agent's: how long a call complete mid-stream waits
// before it begins while the answer streams on.
const earlyDelay = time.Millisecond

func (rec *toolLog) pool(t *testing.T) *tool.Pool {
	t.Helper()
	return rec.poolWith(t, tool.Policy{})
}

// poolWith is pool with policy for the tool.
func (rec *toolLog) poolWith(t *testing.T, policy tool.Policy) *tool.Pool {
	t.Helper()
	echo := tool.Func(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			x := execution{args: string(args), start: time.Since(rec.begin)}
			t := time.NewTimer(toolTime)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				x.cancelled = true
			}
			x.end = time.Since(rec.begin)
			rec.mu.Lock()
			rec.runs = append(rec.runs, x)
			rec.mu.Unlock()
			if x.cancelled {
				return "", ctx.Err()
			}
			if strings.Contains(string(args), "fail") {
				return "", errors.New("echo refused")
			}
			return "echo " + string(args), nil
		})
	p, err := tool.NewPool([]tool.Tool{echo}, tool.PoolConfig{Policies: map[string]tool.Policy{"echo": policy}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (rec *toolLog) executions() []execution {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]execution(nil), rec.runs...)
}

// releaseLog is a Gate that records when each permit was released.
type releaseLog struct {
	begin    time.Time
	mu       sync.Mutex // protects releases
	releases []time.Duration
}

func (g *releaseLog) Acquire(context.Context, int, *llm.Request) (agent.Permit, error) {
	return g, nil
}

func (g *releaseLog) Release(*llm.Response, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releases = append(g.releases, time.Since(g.begin))
}

// OpenAI chat.completion.chunk events.

func oaiChunk(delta any, finish string) step {
	ch := map[string]any{"index": 0, "delta": delta}
	if finish != "" {
		ch["finish_reason"] = finish
	}
	b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{ch}})
	return step{data: string(b)}
}

func oaiCall(wait time.Duration, index int, id, args string) step {
	fn := map[string]any{"arguments": args}
	tc := map[string]any{"index": index, "function": fn}
	if id != "" {
		tc["id"], tc["type"], fn["name"] = id, "function", "echo"
	}
	s := oaiChunk(map[string]any{"tool_calls": []any{tc}}, "")
	s.wait = wait
	return s
}

func oaiText(wait time.Duration, text string) step {
	s := oaiChunk(map[string]any{"content": text}, "")
	s.wait = wait
	return s
}

func oaiEnd(wait time.Duration, finish string) []step {
	s := oaiChunk(map[string]any{}, finish)
	s.wait = wait
	return []step{s, {data: "[DONE]"}}
}

func oaiAnswer(text string) []step {
	return append([]step{oaiText(0, text)}, oaiEnd(0, "stop")...)
}

func openaiModel(t *testing.T, s *sseServer) llm.Model {
	t.Helper()
	url, client := serve(t, s)
	m, err := openai.New(openai.Config{BaseURL: url + "/v1", Model: "m", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Anthropic Messages stream events.

func antEvent(wait time.Duration, v map[string]any) step {
	b, _ := json.Marshal(v)
	return step{wait: wait, event: v["type"].(string), data: string(b)}
}

func antStart() step {
	return antEvent(0, map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []any{},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
}

func antToolStart(wait time.Duration, block int, id string) step {
	return antEvent(wait, map[string]any{"type": "content_block_start", "index": block,
		"content_block": map[string]any{"type": "tool_use", "id": id, "name": "echo", "input": map[string]any{}}})
}

func antArgs(wait time.Duration, block int, partial string) step {
	return antEvent(wait, map[string]any{"type": "content_block_delta", "index": block,
		"delta": map[string]any{"type": "input_json_delta", "partial_json": partial}})
}

func antTextStart(wait time.Duration, block int) step {
	return antEvent(wait, map[string]any{"type": "content_block_start", "index": block,
		"content_block": map[string]any{"type": "text", "text": ""}})
}

func antText(wait time.Duration, block int, text string) step {
	return antEvent(wait, map[string]any{"type": "content_block_delta", "index": block,
		"delta": map[string]any{"type": "text_delta", "text": text}})
}

func antStop(wait time.Duration, block int) step {
	return antEvent(wait, map[string]any{"type": "content_block_stop", "index": block})
}

func antEnd(wait time.Duration, reason string) []step {
	return []step{
		antEvent(wait, map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": reason},
			"usage": map[string]any{"output_tokens": 20}}),
		antEvent(0, map[string]any{"type": "message_stop"}),
	}
}

func antAnswer(text string) []step {
	return append([]step{antStart(), antTextStart(0, 0), antText(0, 0, text), antStop(0, 0)}, antEnd(0, "end_turn")...)
}

func anthropicModel(t *testing.T, s *sseServer) llm.Model {
	t.Helper()
	url, client := serve(t, s)
	m, err := anthropic.New(anthropic.Config{BaseURL: url, Model: "m", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// toolResults returns the tool messages of a conversation.
func toolResults(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// TestToolsStartMidStream streams an answer of two tool calls and text:
// the first call's arguments close at 200ms, the second's at 700ms, and
// the stream ends at 800ms. On the real openai and anthropic clients each
// call's tool starts the moment its arguments close, while the stream goes
// on; the slot is released at the stream's end, not later; the results are
// in call order; and the turn's Tools time runs from the first tool's
// start (200ms) to the last one's end (750ms).
func TestToolsStartMidStream(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		script [][]step
		model  func(*testing.T, *sseServer) llm.Model
	}{
		{
			name: "openai",
			script: [][]step{
				append([]step{
					oaiCall(0, 0, "call_a", ""),
					oaiCall(100*ms, 0, "", `{"x":`),
					oaiCall(100*ms, 0, "", `1}`), // closes at 200ms
					oaiCall(100*ms, 1, "call_b", ""),
					oaiCall(100*ms, 1, "", `{"x":`),
					oaiCall(300*ms, 1, "", `2}`), // closes at 700ms
				}, oaiEnd(100*ms, "tool_calls")...), // ends at 800ms
				oaiAnswer(`{"n": 3}`),
			},
			model: openaiModel,
		},
		{
			name: "anthropic",
			script: [][]step{
				append([]step{
					antStart(),
					antToolStart(0, 0, "call_a"),
					antArgs(100*ms, 0, `{"x":`),
					antArgs(100*ms, 0, `1}`),
					antStop(0, 0), // 200ms
					antToolStart(100*ms, 1, "call_b"),
					antArgs(100*ms, 1, `{"x":`),
					antArgs(300*ms, 1, `2}`),
					antStop(0, 1), // 700ms
				}, antEnd(100*ms, "tool_use")...), // 800ms
				antAnswer(`{"n": 3}`),
			},
			model: anthropicModel,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				begin := time.Now()
				srv := &sseServer{scripts: tt.script, begin: begin}
				rec := &toolLog{begin: begin}
				gate := &releaseLog{begin: begin}
				r := newRunner(t, agent.Config{Model: tt.model(t, srv), Tools: rec.pool(t), Schema: mustSchema(t), Gate: gate})
				st := start("go")
				if err := r.Run(t.Context(), st); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // the server's handler has recorded the last stream's end
				want := []execution{{args: `{"x":1}`, start: 200*ms + earlyDelay, end: 250*ms + earlyDelay}, {args: `{"x":2}`, start: 700*ms + earlyDelay, end: 750*ms + earlyDelay}}
				if diff := cmp.Diff(want, rec.executions(), cmp.AllowUnexported(execution{})); diff != "" {
					t.Errorf("tool runs (-want +got):\n%s", diff)
				}
				ends := srv.streamEnds()
				if len(ends) != 2 || ends[0] != 800*ms {
					t.Fatalf("streams ended at %v, want the first at 800ms", ends)
				}
				if len(gate.releases) != 2 || gate.releases[0] != 800*ms {
					t.Errorf("slot released at %v, want the first at 800ms (the stream's end)", gate.releases)
				}
				got := toolResults(st.Messages)
				wantResults := []llm.Message{
					{Role: llm.RoleTool, ToolCallID: "call_a", Name: "echo", Content: `echo {"x":1}`},
					{Role: llm.RoleTool, ToolCallID: "call_b", Name: "echo", Content: `echo {"x":2}`},
				}
				if diff := cmp.Diff(wantResults, got); diff != "" {
					t.Errorf("tool results (-want +got):\n%s", diff)
				}
				if st.Timings.Tools != 550*ms || len(st.Spans) != 2 || st.Spans[0].Tools != 550*ms {
					t.Errorf("Timings.Tools %v, spans %+v; want 550ms in both (200ms to 750ms)", st.Timings.Tools, st.Spans)
				}
				if string(st.Output) != `{"n":3}` || st.ToolCalls != 2 {
					t.Errorf("output %s, %d tool calls; want {\"n\":3}, 2", st.Output, st.ToolCalls)
				}
			})
		})
	}
}

// TestEarlyToolOfCutStream: a call complete at 200ms starts 1ms later, then
// the stream is cut at 220ms, while the tool runs. The model call is retried; the early tool
// run is cancelled then, and the conversation holds the results of the
// retried answer's calls only.
func TestEarlyToolOfCutStream(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		script [][]step
		model  func(*testing.T, *sseServer) llm.Model
	}{
		{
			name: "openai",
			script: [][]step{
				{
					oaiCall(0, 0, "call_a", ""),
					oaiCall(200*ms, 0, "", `{"x":1}`),
					oaiText(20*ms, "and"), // cut at 220ms: no finish, no [DONE]
				},
				append([]step{oaiCall(0, 0, "call_c", `{"x":3}`)}, oaiEnd(0, "tool_calls")...),
				oaiAnswer(`{"n": 3}`),
			},
			model: openaiModel,
		},
		{
			name: "anthropic",
			script: [][]step{
				{
					antStart(),
					antToolStart(0, 0, "call_a"),
					antArgs(200*ms, 0, `{"x":1}`),
					antStop(0, 0),
					antTextStart(0, 1),
					antText(20*ms, 1, "and"), // cut at 220ms: no message_stop
				},
				append([]step{antStart(), antToolStart(0, 0, "call_c"), antArgs(0, 0, `{"x":3}`), antStop(0, 0)}, antEnd(0, "tool_use")...),
				antAnswer(`{"n": 3}`),
			},
			model: anthropicModel,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				begin := time.Now()
				srv := &sseServer{scripts: tt.script, begin: begin}
				rec := &toolLog{begin: begin}
				r := newRunner(t, agent.Config{Model: tt.model(t, srv), Tools: rec.pool(t), Schema: mustSchema(t)})
				st := start("go")
				if err := r.Run(t.Context(), st); err != nil {
					t.Fatal(err)
				}
				runs := rec.executions()
				if len(runs) != 2 {
					t.Fatalf("tool runs %+v, want 2", runs)
				}
				if cut := runs[0]; cut.args != `{"x":1}` || cut.start != 200*ms+earlyDelay || !cut.cancelled || cut.end != 220*ms {
					t.Errorf("first run %+v, want {\"x\":1} from 200ms, cancelled at 220ms when the stream was cut", cut)
				}
				if runs[1].args != `{"x":3}` || runs[1].cancelled {
					t.Errorf("second run %+v, want {\"x\":3} run to its end", runs[1])
				}
				want := []llm.Message{{Role: llm.RoleTool, ToolCallID: "call_c", Name: "echo", Content: `echo {"x":3}`}}
				if diff := cmp.Diff(want, toolResults(st.Messages)); diff != "" {
					t.Errorf("tool results (-want +got):\n%s", diff)
				}
				if st.ModelCalls != 3 || st.Retries != 1 || st.ToolCalls != 1 || string(st.Output) != `{"n":3}` {
					t.Errorf("model calls %d, retries %d, tool calls %d, output %s; want 3, 1, 1, {\"n\":3}", st.ModelCalls, st.Retries, st.ToolCalls, st.Output)
				}
			})
		})
	}
}

// TestEarlyToolError: a tool that fails mid-stream gives an error result,
// as after the stream, in its place among the results.
func TestEarlyToolError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ms = time.Millisecond
		begin := time.Now()
		srv := &sseServer{begin: begin, scripts: [][]step{
			append([]step{
				oaiCall(0, 0, "call_a", `{"fail":1}`), // closes at once
				oaiCall(100*ms, 1, "call_b", `{"x":2}`),
				oaiText(400*ms, "done"),
			}, oaiEnd(0, "tool_calls")...),
			oaiAnswer(`{"n": 3}`),
		}}
		rec := &toolLog{begin: begin}
		r := newRunner(t, agent.Config{Model: openaiModel(t, srv), Tools: rec.pool(t), Schema: mustSchema(t)})
		st := start("go")
		if err := r.Run(t.Context(), st); err != nil {
			t.Fatal(err)
		}
		wantRuns := []execution{{args: `{"fail":1}`, start: earlyDelay, end: 50*ms + earlyDelay}, {args: `{"x":2}`, start: 100*ms + earlyDelay, end: 150*ms + earlyDelay}}
		if diff := cmp.Diff(wantRuns, rec.executions(), cmp.AllowUnexported(execution{})); diff != "" {
			t.Errorf("tool runs (-want +got):\n%s", diff)
		}
		want := []llm.Message{
			{Role: llm.RoleTool, ToolCallID: "call_a", Name: "echo", Content: "error: tool echo: echo refused", IsError: true},
			{Role: llm.RoleTool, ToolCallID: "call_b", Name: "echo", Content: `echo {"x":2}`},
		}
		if diff := cmp.Diff(want, toolResults(st.Messages)); diff != "" {
			t.Errorf("tool results (-want +got):\n%s", diff)
		}
	})
}

// TestEarlyToolOfChangedCall: a server that sends more of a call after its
// JSON object closed (breaking its protocol) gets the early run cancelled
// and the call handled with the whole answer's arguments, here as
// arguments that are not valid JSON are (the pool rejects them without
// running the tool); trailing whitespace alone changes nothing.
func TestEarlyToolOfChangedCall(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name     string
		more     string
		wantRuns []execution
		want     llm.Message
	}{
		{
			name:     "more arguments",
			more:     `{"y":2}`,
			wantRuns: []execution{{args: `{"x":1}`, start: earlyDelay, end: 20 * ms, cancelled: true}},
			want: llm.Message{Role: llm.RoleTool, ToolCallID: "call_a", Name: "echo", IsError: true,
				Content: "error: tool echo: tool: bad arguments: unexpected data after the arguments object"},
		},
		{
			name:     "trailing whitespace",
			more:     " \n",
			wantRuns: []execution{{args: `{"x":1}`, start: earlyDelay, end: 50*ms + earlyDelay}},
			want:     llm.Message{Role: llm.RoleTool, ToolCallID: "call_a", Name: "echo", Content: `echo {"x":1}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				begin := time.Now()
				srv := &sseServer{begin: begin, scripts: [][]step{
					append([]step{
						oaiCall(0, 0, "call_a", `{"x":1}`),
						oaiCall(10*ms, 0, "", tt.more),
					}, oaiEnd(10*ms, "tool_calls")...),
					oaiAnswer(`{"n": 3}`),
				}}
				rec := &toolLog{begin: begin}
				r := newRunner(t, agent.Config{Model: openaiModel(t, srv), Tools: rec.pool(t), Schema: mustSchema(t)})
				st := start("go")
				if err := r.Run(t.Context(), st); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.wantRuns, rec.executions(), cmp.AllowUnexported(execution{})); diff != "" {
					t.Errorf("tool runs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]llm.Message{tt.want}, toolResults(st.Messages)); diff != "" {
					t.Errorf("tool results (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestNotIdempotentToolWaitsForTheAnswer: a tool whose policy declares it
// not idempotent (NoCoalesce) never starts mid-stream. Its calls run once
// the answer has streamed to its end; so when the stream is cut after the
// call's arguments closed and the model, asked again, sends the same call,
// it runs once. An idempotent tool's call began at once and ran to its end
// before the cut: it runs twice, and only the second run's result counts.
func TestNotIdempotentToolWaitsForTheAnswer(t *testing.T) {
	const ms = time.Millisecond
	wires := []struct {
		name               string
		model              func(*testing.T, *sseServer) llm.Model
		whole, cut, resent []step
	}{
		{
			name:  "openai",
			model: openaiModel,
			whole: append([]step{
				oaiCall(0, 0, "call_a", `{"x":1}`), // closes at once
				oaiText(100*ms, "and"),
			}, oaiEnd(100*ms, "tool_calls")...), // ends at 200ms
			cut: []step{
				oaiCall(0, 0, "call_a", `{"x":1}`),
				oaiText(100*ms, "and"), // cut at 100ms, the early run over
			},
			resent: append([]step{oaiCall(0, 0, "call_a", `{"x":1}`)}, oaiEnd(0, "tool_calls")...),
		},
		{
			name:  "anthropic",
			model: anthropicModel,
			whole: append([]step{
				antStart(), antToolStart(0, 0, "call_a"), antArgs(0, 0, `{"x":1}`), antStop(0, 0),
				antTextStart(0, 1), antText(100*ms, 1, "and"), antStop(0, 1),
			}, antEnd(100*ms, "tool_use")...),
			cut: []step{
				antStart(), antToolStart(0, 0, "call_a"), antArgs(0, 0, `{"x":1}`), antStop(0, 0),
				antTextStart(0, 1), antText(100*ms, 1, "and"),
			},
			resent: append([]step{antStart(), antToolStart(0, 0, "call_a"), antArgs(0, 0, `{"x":1}`), antStop(0, 0)}, antEnd(0, "tool_use")...),
		},
	}
	answer := map[string][]step{"openai": oaiAnswer(`{"n": 3}`), "anthropic": antAnswer(`{"n": 3}`)}
	for _, w := range wires {
		t.Run(w.name+"/whole answer", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				begin := time.Now()
				srv := &sseServer{begin: begin, scripts: [][]step{w.whole, answer[w.name]}}
				rec := &toolLog{begin: begin}
				r := newRunner(t, agent.Config{Model: w.model(t, srv), Tools: rec.poolWith(t, tool.Policy{NoCoalesce: true}), Schema: mustSchema(t)})
				if err := r.Run(t.Context(), start("go")); err != nil {
					t.Fatal(err)
				}
				want := []execution{{args: `{"x":1}`, start: 200 * ms, end: 250 * ms}}
				if diff := cmp.Diff(want, rec.executions(), cmp.AllowUnexported(execution{})); diff != "" {
					t.Errorf("tool runs (-want +got), want one from the stream's end at 200ms:\n%s", diff)
				}
			})
		})
		for _, tt := range []struct {
			name   string
			policy tool.Policy
			runs   int
		}{
			{"cut then sent again/not idempotent", tool.Policy{NoCoalesce: true}, 1},
			{"cut then sent again/idempotent", tool.Policy{}, 2},
		} {
			t.Run(w.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					begin := time.Now()
					srv := &sseServer{begin: begin, scripts: [][]step{w.cut, w.resent, answer[w.name]}}
					rec := &toolLog{begin: begin}
					r := newRunner(t, agent.Config{Model: w.model(t, srv), Tools: rec.poolWith(t, tt.policy), Schema: mustSchema(t)})
					st := start("go")
					if err := r.Run(t.Context(), st); err != nil {
						t.Fatal(err)
					}
					runs := rec.executions()
					if len(runs) != tt.runs {
						t.Fatalf("tool runs %+v, want %d", runs, tt.runs)
					}
					// The handler notes a stream's end after its last flush,
					// which the agent may have read and returned on first.
					synctest.Wait()
					ends := srv.streamEnds()
					if len(ends) != 3 {
						t.Fatalf("streams ended at %v, want 3", ends)
					}
					last := runs[len(runs)-1]
					if last.args != `{"x":1}` || last.cancelled || last.start < ends[1] {
						t.Errorf("last run %+v, want {\"x\":1} from the resent answer's end (%v), run to its end", last, ends[1])
					}
					if tt.runs == 2 && (runs[0].start != earlyDelay || runs[0].cancelled) {
						t.Errorf("first run %+v, want it begun mid-stream at %v and over before the cut", runs[0], earlyDelay)
					}
					want := []llm.Message{{Role: llm.RoleTool, ToolCallID: "call_a", Name: "echo", Content: `echo {"x":1}`}}
					if diff := cmp.Diff(want, toolResults(st.Messages)); diff != "" {
						t.Errorf("tool results (-want +got):\n%s", diff)
					}
					if st.Retries != 1 || st.ToolCalls != 1 || string(st.Output) != `{"n":3}` {
						t.Errorf("retries %d, tool calls %d, output %s; want 1, 1, {\"n\":3}", st.Retries, st.ToolCalls, st.Output)
					}
				})
			})
		}
	}
}
