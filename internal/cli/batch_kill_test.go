package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// serveProcess is `batchagent serve` as a child process.
type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	stderr chan string // the child's stderr, once it exits
}

// startServe starts `batchagent serve` on config with data dir data, on
// any free port, and returns once it listens.
func startServe(t *testing.T, config, data string) *serveProcess {
	t.Helper()
	args := []string{"serve", "--config", config, "--data-dir", data, "--addr", "127.0.0.1:0"}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, stderr: make(chan string, 1)}
	listening := make(chan string, 1)
	go func() { // owned by the child: ends when its stderr closes
		var all strings.Builder
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			all.WriteString(line + "\n")
			if addr, ok := strings.CutPrefix(line, "listening on "); ok {
				listening <- addr
			}
		}
		close(listening)
		p.stderr <- all.String()
	}()
	select {
	case url, ok := <-listening:
		if !ok {
			cmd.Wait()
			t.Fatalf("serve exited before listening: %s", <-p.stderr)
		}
		p.url = url
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("serve not listening after 30s")
	}
	return p
}

func (p *serveProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	<-p.stderr
}

func (p *serveProcess) client() *openai.Client {
	c := openai.NewClient(option.WithBaseURL(p.url+"/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	return &c
}

// TestServeBatchSurvivesSIGKILL kills `batchagent serve` with SIGKILL at
// random moments during a 2,000-line batch on the simulator, restarting
// it each time on the same data directory, until the batch completes:
// every custom_id then appears exactly once across the output and error
// files.
func TestServeBatchSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server several times")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(config, []byte("backends:\n  sim:\n    url: sim://?latency=80ms&seed=1\n    max_inflight: 32\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	const n = 2000
	var in bytes.Buffer
	for i := range n {
		model := "sim"
		if i%97 == 0 {
			model = "missing" // an error line: 404
		}
		fmt.Fprintf(&in, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, model, i)
	}
	ctx := context.Background()
	p := startServe(t, config, data)
	c := p.client()
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(in.Bytes()), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		p.kill(t)
		t.Fatal(err)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		p.kill(t)
		t.Fatal(err)
	}
	kills, lastDone := 0, int64(0)
	for {
		// A random moment, then SIGKILL, unless the batch is done.
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		got, err := c.Batches.Get(ctx, b.ID)
		if err != nil {
			p.kill(t)
			t.Fatal(err)
		}
		if got.Status == openai.BatchStatusCompleted {
			b = got
			break
		}
		if got.Status != openai.BatchStatusInProgress && got.Status != openai.BatchStatusValidating && got.Status != openai.BatchStatusFinalizing {
			p.kill(t)
			t.Fatalf("batch status %s", got.Status)
		}
		done := got.RequestCounts.Completed + got.RequestCounts.Failed
		if kills > 0 && done < lastDone {
			t.Errorf("after a restart %d lines recorded, before it %d", done, lastDone)
		}
		lastDone = done
		p.kill(t)
		kills++
		if kills > 60 {
			t.Fatal("the batch did not complete after 60 restarts")
		}
		p = startServe(t, config, data)
		c = p.client()
	}
	defer p.kill(t)
	t.Logf("completed after %d SIGKILLs", kills)
	if kills < 3 {
		t.Errorf("only %d kills landed during the batch: want several", kills)
	}
	seen := map[string]string{}
	for _, file := range []struct{ id, kind string }{{b.OutputFileID, "output"}, {b.ErrorFileID, "error"}} {
		resp, err := c.Files.Content(ctx, file.id)
		if err != nil {
			t.Fatalf("%s file: %v", file.kind, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
			var l struct {
				CustomID string `json:"custom_id"`
				Response struct {
					StatusCode int `json:"status_code"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("%s file line %q: %v", file.kind, line, err)
			}
			if prev, dup := seen[l.CustomID]; dup {
				t.Fatalf("custom_id %s in the %s file and the %s file", l.CustomID, prev, file.kind)
			}
			seen[l.CustomID] = file.kind
			var i int
			fmt.Sscanf(l.CustomID, "c%d", &i)
			wantStatus, wantKind := 200, "output"
			if i%97 == 0 {
				wantStatus, wantKind = 404, "error"
			}
			if l.Response.StatusCode != wantStatus || file.kind != wantKind {
				t.Errorf("%s: status %d in the %s file, want %d in the %s file", l.CustomID, l.Response.StatusCode, file.kind, wantStatus, wantKind)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d custom_ids across the files, want %d", len(seen), n)
	}
	if b.RequestCounts.Completed+b.RequestCounts.Failed != n {
		t.Errorf("request_counts %+v", b.RequestCounts)
	}
}
