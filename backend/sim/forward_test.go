package sim_test

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// TestEmbedding: the simulator's embedding is a unit vector of the length
// asked for, the same for the same text and different for another.
func TestEmbedding(t *testing.T) {
	a, b, c := sim.Embedding("hello", 16), sim.Embedding("hello", 16), sim.Embedding("world", 16)
	var norm float64
	same := true
	for i := range a {
		norm += float64(a[i]) * float64(a[i])
		if a[i] != b[i] {
			t.Fatalf("component %d: %v then %v for the same text", i, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if len(a) != 16 || math.Abs(norm-1) > 1e-5 || same {
		t.Errorf("embedding of %d components, norm² %v, equal to another text's: %v", len(a), norm, same)
	}
}

// TestForward: Forward answers embeddings (floats, of the dimensions
// asked for, with their usage) and completions, and refuses a malformed
// body or another path as ErrBadRequest naming what is wrong.
func TestForward(t *testing.T) {
	m, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Forward(t.Context(), "/v1/embeddings", []byte(`{"model":"e","input":["ab","cdef"],"dimensions":3}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Data []struct {
			Index     int
			Embedding []float32
		}
		Model string
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || len(e.Data) != 2 || e.Model != "e" || e.Usage.PromptTokens != 2 {
		t.Fatalf("embeddings %s (%v)", raw, err)
	}
	if want := sim.Embedding("cdef", 3); e.Data[1].Index != 1 || len(e.Data[1].Embedding) != 3 || e.Data[1].Embedding[2] != want[2] {
		t.Errorf("second embedding %+v, want %v", e.Data[1], want)
	}
	resp, err = m.Forward(t.Context(), "/v1/completions", []byte(`{"model":"c","prompt":"Once","max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	var c struct {
		Object  string
		Choices []struct{ Text string }
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Object != "text_completion" || len(c.Choices) != 1 || c.Choices[0].Text == "" {
		t.Errorf("completion %s (%v)", raw, err)
	}
	for _, tt := range []struct{ path, body, says string }{
		{"/v1/embeddings", `{"input":"x","dimensions":0}`, "dimensions"},
		{"/v1/embeddings", `{"input":"x","encoding_format":"int8"}`, "encoding_format"},
		{"/v1/embeddings", `{"model":"e"}`, "input"},
		{"/v1/completions", `{"prompt":7}`, "prompt"},
		{"/v1/audio/speech", `{}`, "/v1/audio/speech"},
	} {
		_, err := m.Forward(t.Context(), tt.path, []byte(tt.body))
		if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s %s: %v, want ErrBadRequest naming %s", tt.path, tt.body, err, tt.says)
		}
	}
}
