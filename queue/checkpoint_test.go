package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint/checkpointtest"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/queue"
)

// Compile-time checks: Checkpoints is what the engine plugs in.
var (
	_ batchagent.Checkpointer = (*queue.Checkpoints)(nil)
	_ batchagent.StateLoader  = (*queue.Checkpoints)(nil)
)

// TestConformance runs the Checkpointer suite, each case on a fresh
// redis-server.
func TestConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) batchagent.Checkpointer {
		c, _ := open(t)
		return c.Checkpointer()
	})
}

// stateOf returns a running state of agent index of jobID, with its start
// and its turn's span (times in a zone of their own).
func stateOf(jobID string, index int) agent.State {
	at := time.Date(2026, 11, 27, 18, 0, 0, 123456789, time.FixedZone("", -2*3600))
	return agent.State{JobID: jobID, Index: index, Status: agent.StatusRunning,
		Input:    map[string]any{"n": json.Number("12345678901234567890"), "s": "x"},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Turns: 1,
		Started: at, Spans: []job.Span{{Turn: 0, Start: at.Add(time.Millisecond), Queue: 2, Inference: 3, TTFT: 4, Tools: 5}}}
}

func TestLoadState(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	cp := c.Checkpointer()
	if _, ok, err := cp.LoadState(ctx, "j", 0); err != nil || ok {
		t.Fatalf("LoadState(nothing saved) = ok %v, %v; want none", ok, err)
	}
	run := stateOf("j", 4)
	if err := cp.Save(ctx, run); err != nil {
		t.Fatal(err)
	}
	got, ok, err := cp.LoadState(ctx, "j", 4)
	if err != nil || !ok {
		t.Fatalf("LoadState = ok %v, %v", ok, err)
	}
	if diff := cmp.Diff(run, got); diff != "" {
		t.Fatalf("LoadState (-saved +loaded):\n%s", diff)
	}
	// A final state is kept without its conversation; the caller's state
	// keeps it.
	done := stateOf("j", 4)
	done.Status, done.Output = agent.StatusDone, json.RawMessage(`{"a":1}`)
	if err := cp.Save(ctx, done); err != nil {
		t.Fatal(err)
	}
	if len(done.Messages) != 1 {
		t.Fatalf("Save changed the caller's Messages")
	}
	got, _, err = cp.LoadState(ctx, "j", 4)
	if err != nil || got.Status != agent.StatusDone || got.Messages != nil || string(got.Output) != `{"a":1}` {
		t.Fatalf("LoadState after done = %+v, %v; want done, output kept, no messages", got, err)
	}
	if _, ok, _ := cp.LoadState(ctx, "j", 5); ok {
		t.Fatalf("LoadState(other index) found a state")
	}
}

// TestLoadManyStates: Load scans a hash too big for one reply's encoding
// (HSCAN in batches) and returns every state once, by index.
func TestLoadManyStates(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	cp := c.Checkpointer()
	const n = 2500
	for i := range n {
		st := stateOf("big", i)
		st.Turns = i
		if err := cp.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	states, err := cp.Load(ctx, "big")
	if err != nil || len(states) != n {
		t.Fatalf("Load = %d states, %v; want %d", len(states), err, n)
	}
	for i, st := range states {
		if st.Index != i || st.Turns != i || st.JobID != "big" {
			t.Fatalf("Load()[%d] = index %d, turns %d, job %q; want index and turns %d", i, st.Index, st.Turns, st.JobID, i)
		}
	}
}

// TestSaveKeepsMediaReferences: a running state whose task media were
// read from a file is saved in Redis with the file's reference and hash,
// not its bytes (as checkpoint.Store saves it), and the caller's state
// keeps its bytes; a media part it does not name (a tool's) is kept whole.
func TestSaveKeepsMediaReferences(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	cp := c.Checkpointer()
	png := []byte("\x89PNG\r\n\x1a\n-the-photo-bytes-")
	toolPNG := []byte("\x89PNG\r\n\x1a\n-a-tool-result-")
	st := stateOf("j", 1)
	st.Messages = []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "Classify."}, {Kind: llm.PartImage, Data: png, MediaType: "image/png", Ref: "a.png", Hash: "ab12"}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Parts: []llm.Part{{Kind: llm.PartImage, Data: toolPNG, MediaType: "image/png"}}},
	}
	st.Media = []llm.Part{{Kind: llm.PartImage, Ref: "a.png", Hash: "ab12"}}
	if err := cp.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got := st.Messages[0].Parts[1].Data; string(got) != string(png) {
		t.Fatalf("Save changed the caller's bytes: %q", got)
	}
	got, ok, err := cp.LoadState(ctx, "j", 1)
	if err != nil || !ok {
		t.Fatalf("LoadState = ok %v, %v", ok, err)
	}
	if p := got.Messages[0].Parts[1]; p.Data != nil || p.Ref != "a.png" || p.Hash != "ab12" || p.MediaType != "image/png" {
		t.Errorf("saved task image %+v, want its ref and hash without bytes", p)
	}
	if p := got.Messages[1].Parts[0]; string(p.Data) != string(toolPNG) {
		t.Errorf("saved tool image %+v, want its bytes kept", p)
	}
	if diff := cmp.Diff(st.Media, got.Media); diff != "" {
		t.Errorf("Media (-saved +loaded):\n%s", diff)
	}
}
