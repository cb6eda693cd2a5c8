//go:build unix

package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/server"
)

// The tests in this file drive `batchagent serve`'s handler with the
// official openai npm client: each runs one script of testdata/npm (an
// ES module) under node, with the gateway's base URL and key in the
// environment, and asserts on the JSON line the script prints.
//
// Node and npm are looked up on PATH. Without them the tests skip, except
// under CI (CI set), where a missing node is a failure. The scripts'
// node_modules are installed by the first test that needs them, with
// `npm ci` from testdata/npm/package-lock.json, under a file lock so that
// test binaries running at once do not install over each other.

// npmTask is the text part each script sends before its image.
const npmTask = "Classify this photo."

// npmSchema is the output schema of the "classifier" agent.
const npmSchema = `{"type":"object","properties":{"label":{"type":"string","enum":["shoe","bag","hat"]},` +
	`"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["label","confidence"],"additionalProperties":false}`

// npmDir returns the absolute path of testdata/npm with its node_modules
// installed, and the node binary; it skips the test when node or npm is
// missing and CI is unset.
func npmDir(t *testing.T) (dir, node string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set, and the npm client tests need node and npm on PATH: node: %v; npm: %v", errNode, errNpm)
		}
		t.Skip("node or npm is not on PATH: the openai npm client tests need them (under CI they fail instead)")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := npmInstall(t.Context(), dir, npm); err != nil {
		t.Fatal(err)
	}
	return dir, node
}

// npmInstall runs `npm ci` in dir unless its node_modules were installed
// from the present package-lock.json (a stamp in node_modules holds the
// lock's hash). It holds an exclusive lock on dir/.install.lock meanwhile.
func npmInstall(ctx context.Context, dir, npm string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("npm client tests: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".batchagent-lock-sha256")

	f, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("npm client tests: %w", err)
	}
	defer f.Close() // unlocks too
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("npm client tests: locking %s: %w", f.Name(), err)
	}

	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// npmRun runs script in dir under node with env added to the
// environment, and unmarshals the last line it prints into v. A script
// that exits non-zero fails the test with its output.
func npmRun(t *testing.T, dir, node, script string, env map[string]string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, val := range env {
		cmd.Env = append(cmd.Env, k+"="+val)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.Bytes(), stderr.Bytes())
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("node %s printed %q: %v\nstderr: %s", script, stdout.Bytes(), err, stderr.Bytes())
	}
}

// npmGateway starts a gateway that takes key testKey, serves the
// simulator (billing media as OpenAI does) as model "sim" and agent
// "classifier" on it with output schema npmSchema, and keeps batches in
// a temporary directory. It returns the environment the scripts need.
func npmGateway(t *testing.T) map[string]string {
	t.Helper()
	m := newSim(t, sim.Config{Seed: 30, ToolTurns: -1, MediaTokens: media.BillingOpenAI})
	spec, err := batchagent.NewSpec(batchagent.Def{Model: m, Task: "Classify the product photo: {input}",
		OutputSchema: json.RawMessage(npmSchema), Priority: batchagent.Interactive})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}},
		Agents:   map[string]*batchagent.Spec{"classifier": spec},
		Keys:     []server.Key{{Name: "npm", SHA256: server.HashKey(testKey)}},
		Batches:  openStore(t, t.TempDir()),
	})
	return map[string]string{"BATCHAGENT_URL": g.url + "/v1", "BATCHAGENT_KEY": testKey}
}

// npmUsage is a completion's usage as the npm client returns it.
type npmUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// npmChat is what chat.mjs prints.
type npmChat struct {
	Model   string    `json:"model"`
	Content string    `json:"content"`
	Finish  string    `json:"finish"`
	Usage   *npmUsage `json:"usage"`
	Stream  struct {
		Content string    `json:"content"`
		Usage   *npmUsage `json:"usage"`
		Chunks  int       `json:"chunks"`
	} `json:"stream"`
}

// npmClassification parses an answer of the classifier agent, failing the
// test when it does not satisfy npmSchema.
func npmClassification(t *testing.T, what, content string) {
	t.Helper()
	var c struct {
		Label      string   `json:"label"`
		Confidence *float64 `json:"confidence"`
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	err := dec.Decode(&c)
	if err == nil && dec.More() {
		err = fmt.Errorf("data after the JSON value at offset %d", dec.InputOffset())
	}
	if err != nil || c.Confidence == nil || *c.Confidence < 0 || *c.Confidence > 1 ||
		(c.Label != "shoe" && c.Label != "bag" && c.Label != "hat") {
		t.Errorf("%s: answer %q does not satisfy the agent's schema (%v)", what, content, err)
	}
}

// npmImageFile writes a w×h PNG's data: URL to a temporary file and
// returns the file's path.
func npmImageFile(t *testing.T, w, h int) string {
	t.Helper()
	url, _ := photo(t, w, h)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("photo-%dx%d.txt", w, h))
	if err := os.WriteFile(path, []byte(url), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNpmImagePassthrough: the npm client's chat.completions.create with
// a text part and a data-URL PNG reaches the simulator as a passthrough
// model, plain and streamed; the prompt tokens are the text's plus the
// image's as OpenAI bills it (600×400 at detail high: two 512-px tiles,
// 2×170+85 = 425).
func TestNpmImagePassthrough(t *testing.T) {
	dir, node := npmDir(t)
	env := npmGateway(t)
	const w, h = 600, 400
	env["IMAGE_FILE"], env["MODEL"], env["DETAIL"] = npmImageFile(t, w, h), "sim", "high"
	var got npmChat
	npmRun(t, dir, node, "chat.mjs", env, &got)

	imageTokens := media.OpenAIImageTokens(w, h, "high")
	if imageTokens != 425 {
		t.Fatalf("OpenAI bills a %d×%d image at detail high %d tokens, want 425", w, h, imageTokens)
	}
	want := sim.Tokens(len(npmTask)) + imageTokens
	if got.Model != "sim" || got.Content == "" || got.Finish != "stop" || got.Usage == nil {
		t.Fatalf("completion %+v", got)
	}
	if got.Usage.PromptTokens != want || got.Usage.TotalTokens != want+got.Usage.CompletionTokens {
		t.Errorf("usage %+v, want %d prompt tokens (%d of text, %d of the image)", *got.Usage, want, sim.Tokens(len(npmTask)), imageTokens)
	}
	if got.Stream.Content != got.Content || got.Stream.Chunks < 2 {
		t.Errorf("streamed %q in %d chunks, want %q", got.Stream.Content, got.Stream.Chunks, got.Content)
	}
	if got.Stream.Usage == nil || *got.Stream.Usage != *got.Usage {
		t.Errorf("streamed usage %+v, want %+v", got.Stream.Usage, *got.Usage)
	}
}

// TestNpmImageAgent: the same request to "agent:classifier" runs the
// agent with the image in its first message; its answer satisfies the
// agent's output schema, plain and streamed, and the prompt tokens
// include the image's (detail low: 85).
func TestNpmImageAgent(t *testing.T) {
	dir, node := npmDir(t)
	env := npmGateway(t)
	env["IMAGE_FILE"], env["MODEL"], env["DETAIL"] = npmImageFile(t, 64, 48), "agent:classifier", "low"
	var got npmChat
	npmRun(t, dir, node, "chat.mjs", env, &got)

	if got.Model != "agent:classifier" || got.Usage == nil {
		t.Fatalf("completion %+v", got)
	}
	npmClassification(t, "agent", got.Content)
	npmClassification(t, "agent, streamed", got.Stream.Content)
	if least := media.OpenAIImageTokens(64, 48, "low") + sim.Tokens(len(npmTask)); got.Usage.PromptTokens < least {
		t.Errorf("usage %+v: fewer prompt tokens than the task's text and the image's %d", *got.Usage, least)
	}
}

// TestNpmBatchImages: through the npm client, files.create of a JSONL
// whose 20 lines each carry a data-URL image (even lines to the
// passthrough model, odd ones to the agent), batches.create, polling
// batches.retrieve, and files.content of the output: the batch completes
// with every custom_id answered exactly once and no error file.
func TestNpmBatchImages(t *testing.T) {
	dir, node := npmDir(t)
	env := npmGateway(t)
	const n = 20
	var in bytes.Buffer
	for i := range n {
		url, _ := photo(t, 8+i, 8)
		model := "sim"
		if i%2 == 1 {
			model = "agent:classifier"
		}
		body, err := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": npmTask},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": url, "detail": "low"}},
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, `{"custom_id":"img-%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i, body)
	}
	env["INPUT_FILE"] = filepath.Join(t.TempDir(), "images.jsonl")
	if err := os.WriteFile(env["INPUT_FILE"], in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var got struct {
		File struct {
			Bytes   int    `json:"bytes"`
			Purpose string `json:"purpose"`
		} `json:"file"`
		Batch struct {
			Status        string  `json:"status"`
			OutputFileID  string  `json:"output_file_id"`
			ErrorFileID   *string `json:"error_file_id"`
			RequestCounts struct {
				Total, Completed, Failed int
			} `json:"request_counts"`
		} `json:"batch"`
		Output []struct {
			CustomID string `json:"custom_id"`
			Response *struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Model   string `json:"model"`
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
					Usage npmUsage `json:"usage"`
				} `json:"body"`
			} `json:"response"`
			Error json.RawMessage `json:"error"`
		} `json:"output"`
		Errors []json.RawMessage `json:"errors"`
	}
	npmRun(t, dir, node, "batch.mjs", env, &got)

	if got.File.Bytes != in.Len() || got.File.Purpose != "batch" {
		t.Errorf("uploaded file %+v, want %d bytes of purpose batch", got.File, in.Len())
	}
	b := got.Batch
	if b.Status != "completed" || b.RequestCounts.Total != n || b.RequestCounts.Completed != n || b.RequestCounts.Failed != 0 || b.OutputFileID == "" {
		t.Fatalf("batch %+v", b)
	}
	if (b.ErrorFileID != nil && *b.ErrorFileID != "") || len(got.Errors) != 0 {
		t.Errorf("error file %v with %d lines, want none", b.ErrorFileID, len(got.Errors))
	}
	seen := map[string]int{}
	for _, line := range got.Output {
		seen[line.CustomID]++
		r := line.Response
		if r == nil || r.StatusCode != 200 || len(r.Body.Choices) != 1 || (len(line.Error) > 0 && string(line.Error) != "null") {
			t.Errorf("%s: not answered: %+v, error %s", line.CustomID, r, line.Error)
			continue
		}
		var i int
		if _, err := fmt.Sscanf(line.CustomID, "img-%d", &i); err != nil {
			t.Errorf("unknown custom_id %q", line.CustomID)
			continue
		}
		imageTokens := media.OpenAIImageTokens(8+i, 8, "low")
		if i%2 == 1 {
			if r.Body.Model != "agent:classifier" {
				t.Errorf("%s: model %q, want agent:classifier", line.CustomID, r.Body.Model)
			}
			npmClassification(t, line.CustomID, r.Body.Choices[0].Message.Content)
			if r.Body.Usage.PromptTokens < imageTokens {
				t.Errorf("%s: %d prompt tokens, fewer than the image's %d", line.CustomID, r.Body.Usage.PromptTokens, imageTokens)
			}
			continue
		}
		if want := sim.Tokens(len(npmTask)) + imageTokens; r.Body.Model != "sim" || r.Body.Choices[0].Message.Content == "" || r.Body.Usage.PromptTokens != want {
			t.Errorf("%s: model %q, answer %q, %d prompt tokens; want sim, an answer, %d", line.CustomID, r.Body.Model,
				r.Body.Choices[0].Message.Content, r.Body.Usage.PromptTokens, want)
		}
	}
	for i := range n {
		if id := fmt.Sprintf("img-%d", i); seen[id] != 1 {
			t.Errorf("%s answered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct custom_ids in the output, want %d", len(seen), n)
	}
}

// TestNpmHostileImage: an image_url whose data: URL is not base64 makes
// the npm client raise a 400 BadRequestError whose param names the place,
// for the passthrough model and for the agent alike.
func TestNpmHostileImage(t *testing.T) {
	dir, node := npmDir(t)
	env := npmGateway(t)
	env["IMAGE_URL"] = "data:image/png;base64,***not base64***"
	for _, model := range []string{"sim", "agent:classifier"} {
		env["MODEL"] = model
		var got struct {
			Answered json.RawMessage `json:"answered"`
			Error    *struct {
				Name       string `json:"name"`
				BadRequest bool   `json:"badRequest"`
				Status     int    `json:"status"`
				Param      string `json:"param"`
				Type       string `json:"type"`
				Message    string `json:"message"`
			} `json:"error"`
		}
		npmRun(t, dir, node, "hostile.mjs", env, &got)
		e := got.Error
		if e == nil {
			t.Errorf("%s: answered %s, want a 400", model, got.Answered)
			continue
		}
		if !e.BadRequest || e.Name != "BadRequestError" || e.Status != 400 || e.Type != "invalid_request_error" ||
			e.Param != "messages[0].content[1].image_url.url" || !strings.Contains(e.Message, "not base64") {
			t.Errorf("%s: error %+v; want a 400 BadRequestError, param messages[0].content[1].image_url.url, naming \"not base64\"", model, *e)
		}
	}
}
