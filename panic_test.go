package batchagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/reduce"
	"github.com/batchagent/batchagent/tool"
)

// echoModel answers every request at once with {"value": N,
// "first_word": "echo"}, N the last user message (a task "{id}"); it
// panics instead for the task named in panicOn ("" never).
type echoModel struct {
	panicOn string
}

func (m *echoModel) answer(req *llm.Request) string {
	task := req.Messages[len(req.Messages)-1].Content
	return fmt.Sprintf(`{"value":%s,"first_word":"echo"}`, strings.TrimSpace(task))
}

func (m *echoModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if m.panicOn != "" && req.Messages[len(req.Messages)-1].Content == m.panicOn {
		panic("model exploded")
	}
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: m.answer(req)}, FinishReason: llm.FinishStop}, nil
}

// streamModel is an echoModel that streams, panicking after the first
// event.
type streamModel struct{ echoModel }

func (m *streamModel) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{Type: llm.EventText, Text: m.answer(req)}, nil) {
			return
		}
		if m.panicOn != "" && req.Messages[len(req.Messages)-1].Content == m.panicOn {
			panic(errors.New("stream exploded"))
		}
		yield(llm.Event{Type: llm.EventDone, FinishReason: llm.FinishStop}, nil)
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPanicInUserCode: each place where the engine runs code it did not
// write panics for input 1 only. The process survives, input 1's result is
// a failure of kind panic whose error is a *PanicError (class "panic",
// the panic value in the message), its stack is logged at Error, and
// every other input is answered.
func TestPanicInUserCode(t *testing.T) {
	panicky := func(ctx context.Context, in batchagent.Input) (json.RawMessage, error) {
		if in["id"] == "1" {
			panic("func exploded")
		}
		return json.RawMessage(fmt.Sprintf(`{"value":%v,"first_word":"rule"}`, in["id"])), nil
	}
	tests := []struct {
		name      string
		def       func(d *batchagent.Def)
		cfg       func(c *batchagent.Config)
		wantValue string // in the message of input 1's error
		wantOp    string
	}{
		{
			name: "fallback func",
			def: func(d *batchagent.Def) {
				d.Model = newSim(t, sim.Config{Latency: time.Hour})
				d.Budget = 50 * time.Millisecond
				d.Fallbacks = []batchagent.Fallback{{Func: panicky}}
			},
			wantValue: "func exploded", wantOp: "generate",
		},
		{
			name: "check",
			def: func(d *batchagent.Def) {
				d.Check = func(out json.RawMessage) error {
					if bytes.Contains(out, []byte(`"value":1,`)) {
						panic("check exploded")
					}
					return nil
				}
			},
			wantValue: "check exploded", wantOp: "validate",
		},
		{
			name:      "model generate",
			def:       func(d *batchagent.Def) { d.Model = &echoModel{panicOn: "1"} },
			wantValue: "model exploded", wantOp: "generate",
		},
		{
			name:      "model stream",
			def:       func(d *batchagent.Def) { d.Model = &streamModel{echoModel{panicOn: "1"}} },
			wantValue: "stream exploded", wantOp: "generate",
		},
		{
			name: "on result",
			cfg: func(c *batchagent.Config) {
				c.OnResult = func(r batchagent.Result) {
					if r.Index == 1 {
						panic("hook exploded")
					}
				}
			},
			wantValue: "hook exploded", wantOp: "on_result",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &syncBuffer{}
			cfg := batchagent.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			d := batchagent.Def{Model: &echoModel{}, Task: "{id}", OutputSchema: json.RawMessage(outSchema)}
			if tt.def != nil {
				tt.def(&d)
			}
			e, res := runWith(t, cfg, d, batchagent.Slice(inputs(4)))
			for i, r := range res {
				if i == 1 {
					continue
				}
				if r.Err != nil {
					t.Errorf("result %d: %v, want an answer", i, r.Err)
				}
			}
			r := res[1]
			pe, ok := errors.AsType[*batchagent.PanicError](r.Err)
			if !ok {
				t.Fatalf("result 1 error %v, want a *PanicError", r.Err)
			}
			if got := batchagent.KindOf(r.Err); got != batchagent.KindPanic {
				t.Errorf("result 1 kind %q, want %q", got, batchagent.KindPanic)
			}
			if !errors.Is(r.Err, batchagent.ErrPanic) || !strings.Contains(r.Err.Error(), tt.wantValue) {
				t.Errorf("result 1 error %q: want ErrPanic and %q in it", r.Err, tt.wantValue)
			}
			if ae, _ := errors.AsType[*batchagent.AgentError](r.Err); ae == nil || ae.Op != tt.wantOp {
				t.Errorf("result 1 error %#v, want op %q", ae, tt.wantOp)
			}
			if len(pe.Stack) == 0 {
				t.Error("PanicError.Stack is empty")
			}
			line, err := json.Marshal(r)
			if err != nil || !bytes.Contains(line, []byte(`"kind":"panic"`)) || !bytes.Contains(line, []byte(`"class":"panic"`)) {
				t.Errorf("result 1 line %s (%v), want kind and class panic", line, err)
			}
			if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, tt.wantValue) || !strings.Contains(l, "goroutine") {
				t.Errorf("log %q: want an Error with the panic value and its stack", l)
			}
			if s := e.Stats(); s.OK != 3 || s.Failed != 1 || s.ByKind[batchagent.KindPanic] != 1 {
				t.Errorf("stats ok %d failed %d by kind %v, want 3, 1, {panic: 1}", s.OK, s.Failed, s.ByKind)
			}
		})
	}
}

// TestPanicInToolGoesToModel: a tool.Tool that panics is recovered by its
// pool; the model gets the panic as the tool's error and answers.
func TestPanicInToolGoesToModel(t *testing.T) {
	boom := tool.Func(tool.Spec{Name: "boom", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (string, error) { panic("tool exploded") })
	e, res := runWith(t, batchagent.Config{}, batchagent.Def{
		Model: newSim(t, sim.Config{ToolTurns: 1, Tools: []string{"boom"}}), Task: "{id}",
		OutputSchema: json.RawMessage(outSchema), Tools: []tool.Tool{boom},
	}, batchagent.Slice(inputs(3)))
	for i, r := range res {
		if r.Err != nil || r.ToolCalls == 0 {
			t.Errorf("result %d: %d tool calls, err %v; want the tool called and an answer", i, r.ToolCalls, r.Err)
		}
	}
	if ts := e.Stats().Tools; len(ts) != 1 || ts[0].Errors == 0 {
		t.Errorf("tool stats %+v, want boom's errors counted", ts)
	}
}

// TestPanicInReduceModel: a reduce step runs its agents on the engine: a
// model that panics while reducing fails the reduce with a *PanicError,
// and the process goes on.
func TestPanicInReduceModel(t *testing.T) {
	spec := mustSpec(t, batchagent.Def{Model: &echoModel{panicOn: "reduce"}, Task: "{id}"})
	_, err := reduce.Outputs(t.Context(), newEngine(t, batchagent.Config{}), spec,
		[]json.RawMessage{json.RawMessage(`1`), json.RawMessage(`2`)}, reduce.Config{Task: "reduce"})
	if !errors.Is(err, batchagent.ErrPanic) || batchagent.KindOf(err) != batchagent.KindPanic {
		t.Fatalf("reduce.Outputs = %v (kind %q), want a panic", err, batchagent.KindOf(err))
	}
}
