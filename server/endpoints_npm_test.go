//go:build unix

package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/server"
)

// endpointsGateway serves model "sim" (the in-process simulator, which
// calls tools on its first turn) and model "http" (the HTTP simulator
// through the OpenAI backend, whose Forward posts bodies upstream), with
// one key and the Batch API.
func endpointsGateway(t *testing.T) map[string]string {
	t.Helper()
	_, url := simHTTP(t, simhttp.Config{Model: sim.Config{Seed: 32}})
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{
			"sim":  {Model: newSim(t, sim.Config{Seed: 32}), Name: "sim"},
			"http": {Model: openaiBackend(t, url, ""), Name: "sim"},
		},
		Keys:    []server.Key{{Name: "npm", SHA256: server.HashKey(testKey)}},
		Batches: openStore(t, t.TempDir()),
	})
	return map[string]string{"BATCHAGENT_URL": g.url + "/v1", "BATCHAGENT_KEY": testKey}
}

// npmEndpoints is what endpoints.mjs prints.
type npmEndpoints struct {
	Model struct {
		ID, Object string
	}
	ChatN struct {
		Indexes       []int
		Texts, Finish []string
	}
	ChatNStream struct{ Texts []string }
	Missing     struct {
		Status      int
		Code, Param string
	}
	Embeddings struct {
		Object string
		N      int
		Dims   []int
		First  []float64
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	Embeddings8 struct {
		Dims  int
		First []float64
	}
	Completion struct {
		Object, Text, Finish string
		Usage                *npmUsage
	}
	CompletionStream string
	Response         struct {
		Object, Status, Text string
		Types                []string
		Usage                *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	ResponseStream struct {
		Events      []string
		First, Last string
		Args        string
		Status      string
		Call        *struct {
			Type, Name, Arguments, Status string
			CallID                        string `json:"call_id"`
		}
	}
	AfterTool struct {
		Status, Text string
		Types        []string
	}
}

// TestNpmEndpoints: the official openai npm client's models.retrieve,
// embeddings.create, completions.create and responses.create (plain, and
// streamed with a function tool, then its output sent back) against the
// in-process simulator and against the HTTP simulator through the
// OpenAI backend's verbatim forwarding.
func TestNpmEndpoints(t *testing.T) {
	dir, node := npmDir(t)
	env := endpointsGateway(t)
	var want []float64
	for _, model := range []string{"sim", "http"} {
		t.Run(model, func(t *testing.T) {
			env["MODEL"] = model
			var got npmEndpoints
			npmRun(t, dir, node, "endpoints.mjs", env, &got)
			if got.Model.ID != model || got.Model.Object != "model" {
				t.Errorf("models.retrieve: %+v", got.Model)
			}
			if got.Missing.Status != 404 || got.Missing.Code != "model_not_found" || got.Missing.Param != "model" {
				t.Errorf("models.retrieve of a missing model: %+v, want 404 model_not_found", got.Missing)
			}
			e := got.Embeddings
			if e.Object != "list" || e.N != 2 || len(e.Dims) != 2 || e.Dims[0] != sim.DefaultDimensions || e.Dims[1] != sim.DefaultDimensions {
				t.Errorf("embeddings: %+v, want 2 of %d dimensions", e, sim.DefaultDimensions)
			}
			if wantTokens := sim.Tokens(len("first text")) + sim.Tokens(len("second text")); e.Usage.PromptTokens != wantTokens || e.Usage.TotalTokens != wantTokens {
				t.Errorf("embeddings usage %+v, want %d tokens", e.Usage, wantTokens)
			}
			// The base64 the client decoded is the float vector's first components.
			v := sim.Embedding("first text", sim.DefaultDimensions)
			for i, x := range e.First {
				if float32(x) != v[i] {
					t.Errorf("embedding[0][%d] = %v, want %v", i, x, v[i])
				}
			}
			v8 := sim.Embedding("first text", 8)
			if got.Embeddings8.Dims != 8 || len(got.Embeddings8.First) != 3 || float32(got.Embeddings8.First[0]) != v8[0] {
				t.Errorf("embeddings with dimensions 8: %+v, want %v...", got.Embeddings8, v8[:3])
			}
			if want == nil {
				want = e.First
			} else if fmt.Sprint(want) != fmt.Sprint(e.First) {
				t.Errorf("the embedding differs between backends: %v and %v", want, e.First)
			}
			c := got.Completion
			if c.Object != "text_completion" || c.Text == "" || (c.Finish != "stop" && c.Finish != "length") || c.Usage == nil ||
				c.Usage.PromptTokens != sim.Tokens(len("Once upon a time")) || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
				t.Errorf("completion: %+v", c)
			}
			if got.CompletionStream != c.Text {
				t.Errorf("streamed completion %q, want %q", got.CompletionStream, c.Text)
			}
			r := got.Response
			if r.Object != "response" || r.Status != "completed" || r.Text == "" || strings.Join(r.Types, ",") != "message" ||
				r.Usage == nil || r.Usage.InputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Errorf("response: %+v", r)
			}
			s := got.ResponseStream
			for _, ev := range []string{"response.created", "response.in_progress", "response.output_item.added",
				"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"} {
				if !strings.Contains(","+strings.Join(s.Events, ",")+",", ","+ev+",") {
					t.Errorf("streamed response: no %s event in %v", ev, s.Events)
				}
			}
			if s.First != "response.created" || s.Last != "response.completed" || s.Status != "completed" {
				t.Errorf("streamed response: first %s, last %s, status %s", s.First, s.Last, s.Status)
			}
			if s.Call == nil || s.Call.Name != "get_weather" || s.Call.CallID == "" || s.Call.Arguments != s.Args || !strings.Contains(s.Args, `"city"`) {
				t.Errorf("streamed function call %+v, arguments streamed %q", s.Call, s.Args)
			}
			if n := got.ChatN; fmt.Sprint(n.Indexes) != "[0 1]" || len(n.Texts) != 2 || n.Texts[0] == "" || n.Texts[1] == "" || len(n.Finish) != 2 || n.Finish[1] == "" {
				t.Errorf("chat completion with n 2: %+v, want choices 0 and 1, each with text and finish", n)
			}
			if ts := got.ChatNStream.Texts; len(ts) != 2 || ts[0] == "" || ts[1] == "" {
				t.Errorf("streamed chat completion with n 2: texts %q, want 2", ts)
			}
			if a := got.AfterTool; a.Status != "completed" || a.Text == "" || strings.Join(a.Types, ",") != "message" {
				t.Errorf("after the tool's output: %+v, want a message", a)
			}
		})
	}
}

// TestNpmBatchEmbeddings: a Batch API file of embedding lines, sent with
// the npm client to a batch at /v1/embeddings, completes with each line's
// vectors; a line whose url is another endpoint fails validation.
func TestNpmBatchEmbeddings(t *testing.T) {
	dir, node := npmDir(t)
	env := endpointsGateway(t)
	var lines []string
	for i := range 3 {
		lines = append(lines, fmt.Sprintf(`{"custom_id":"e%d","method":"POST","url":"/v1/embeddings","body":{"model":"http","input":"text %d","dimensions":4,"encoding_format":"float"}}`, i, i))
	}
	path := filepath.Join(t.TempDir(), "embeddings.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env["INPUT_FILE"], env["ENDPOINT"] = path, "/v1/embeddings"
	var got struct {
		Batch struct {
			Status, Endpoint string
			RequestCounts    struct{ Total, Completed, Failed int } `json:"request_counts"`
		}
		Output []struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Data []struct{ Embedding []float64 }
				}
			}
		}
	}
	npmRun(t, dir, node, "batch.mjs", env, &got)
	if got.Batch.Status != "completed" || got.Batch.Endpoint != "/v1/embeddings" || got.Batch.RequestCounts.Completed != 3 || len(got.Output) != 3 {
		t.Fatalf("batch %+v with %d output lines", got.Batch, len(got.Output))
	}
	for _, o := range got.Output {
		var i int
		fmt.Sscanf(o.CustomID, "e%d", &i)
		want := sim.Embedding(fmt.Sprintf("text %d", i), 4)
		if o.Response.StatusCode != 200 || len(o.Response.Body.Data) != 1 || len(o.Response.Body.Data[0].Embedding) != 4 ||
			float32(o.Response.Body.Data[0].Embedding[0]) != want[0] {
			t.Errorf("line %s: %+v, want %v", o.CustomID, o.Response, want)
		}
	}

	// A line of another url in an embeddings batch fails the batch's validation.
	bad := strings.Replace(lines[0], `"url":"/v1/embeddings"`, `"url":"/v1/chat/completions"`, 1)
	if err := os.WriteFile(path, []byte(bad+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var failed struct {
		Batch struct {
			Status string
			Errors struct {
				Data []struct{ Code, Param string }
			}
		}
	}
	npmRun(t, dir, node, "batch.mjs", env, &failed)
	if failed.Batch.Status != "failed" || len(failed.Batch.Errors.Data) == 0 || failed.Batch.Errors.Data[0].Code != "invalid_url" {
		t.Errorf("a chat line in an embeddings batch: %+v, want failed with invalid_url", failed.Batch)
	}
}
