package batchagent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// requestBodies records the bodies of the requests an HTTP handler
// serves.
type requestBodies struct {
	next http.Handler
	mu   sync.Mutex // protects got
	got  [][]byte
}

func (b *requestBodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.got = append(b.got, body)
	b.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.next.ServeHTTP(w, r)
}

// with returns the bodies recorded that contain s.
func (b *requestBodies) with(s string) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [][]byte
	for _, body := range b.got {
		if bytes.Contains(body, []byte(s)) {
			out = append(out, body)
		}
	}
	return out
}

// simOverHTTP starts the HTTP simulator (one tool turn) behind a body
// recorder and returns an OpenAI-wire model speaking to it.
func simOverHTTP(t *testing.T) (llm.Model, *requestBodies) {
	t.Helper()
	s, err := simhttp.New(simhttp.Config{Model: sim.Config{ToolTurns: 1, Seed: 3},
		PrefillPerToken: time.Nanosecond, DecodeStep: time.Microsecond, DecodeStepPerSeq: time.Nanosecond})
	if err != nil {
		t.Fatalf("simhttp.New = %v", err)
	}
	rec := &requestBodies{next: s}
	hs := httptest.NewServer(rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // Run's result
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simhttp Run = %v", err)
		}
	})
	m, err := backendopenai.New(backendopenai.Config{BaseURL: hs.URL + "/v1", Flavor: backendopenai.FlavorSim, HTTPClient: hs.Client()})
	if err != nil {
		t.Fatalf("openai.New = %v", err)
	}
	return m, rec
}

// TestCheckpointKeepsMediaReferences runs a job with an image field over
// three inputs with a SQLite checkpoint store: each saved state holds the
// image's path and hash, not its bytes. Then it cuts every agent back to
// its first completed turn, as a kill right after it would leave it,
// changes the second input's image and deletes the third's, and resumes:
// the first agent's resumed turn sends the image's bytes again, read back
// from the file; the second starts afresh from its task with the new
// image; the third fails with kind input naming the path.
func TestCheckpointKeepsMediaReferences(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"a.png", "b.png", "c.png"} {
		writePNG(t, filepath.Join(dir, name), 30+i, 20)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hash := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	loader, err := media.NewLoader(media.LoaderConfig{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loader.Close() })
	echo := tool.Func(tool.Spec{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		func(context.Context, json.RawMessage) (string, error) { return "found", nil })
	m, rec := simOverHTTP(t)
	def := batchagent.Def{ID: "photos", Model: m, Task: "Describe item {title}.", Tools: []tool.Tool{echo},
		Media:        []job.MediaField{{Kind: llm.PartImage, Ref: "{photo}"}},
		MediaLoader:  loader,
		OutputSchema: json.RawMessage(outSchema)}
	ins := input.Slice([]batchagent.Input{{"title": "A1", "photo": "a.png"}, {"title": "B2", "photo": "b.png"}, {"title": "C3", "photo": "c.png"}})
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *checkpoint.Store {
		s, err := checkpoint.Open(path, checkpoint.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	store := open()
	_, res := runWith(t, batchagent.Config{Checkpoint: store}, def, ins)
	for _, r := range res {
		if r.Err != nil || r.Turns != 2 {
			t.Fatalf("first run: input %d: turns %d, error %v; want 2 turns, no error", r.Index, r.Turns, r.Err)
		}
	}
	ctx := t.Context()
	finals, err := store.Load(ctx, "photos")
	if err != nil || len(finals) != 3 {
		t.Fatalf("Load = %d states, %v", len(finals), err)
	}
	for i, name := range []string{"a.png", "b.png", "c.png"} {
		want := []llm.Part{{Kind: llm.PartImage, Ref: name, Hash: hash(read(name))}}
		if got := finals[i].Media; !reflect.DeepEqual(got, want) {
			t.Errorf("final state %d: media %+v, want %+v (kept without the conversation)", i, got, want)
		}
		st, err := store.State(ctx, "photos", i)
		if err != nil {
			t.Fatal(err)
		}
		p := st.Messages[0].Parts[1]
		if p.Data != nil || p.Ref != name || p.Hash != want[0].Hash || p.MediaType != "image/png" {
			t.Errorf("saved state %d: image part %+v, want no bytes, ref %s, its hash and type", i, p, name)
		}
		// Cut back to the first turn: the task, the tool call, its result.
		st.Status, st.Output, st.Raw, st.Turns, st.Messages = agent.StatusRunning, nil, "", 1, st.Messages[:3]
		if err := store.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	writePNG(t, filepath.Join(dir, "b.png"), 50, 25) // changed
	newB := read("b.png")
	if err := os.Remove(filepath.Join(dir, "c.png")); err != nil { // gone
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.got = nil
	rec.mu.Unlock()
	store = open()
	t.Cleanup(func() { store.Close() })
	_, res = runWith(t, batchagent.Config{Checkpoint: store}, def, ins)

	a := rec.with("Describe item A1.")
	if len(a) != 1 || !bytes.Contains(a[0], []byte(base64.StdEncoding.EncodeToString(read("a.png")))) {
		t.Errorf("resumed agent 0: %d requests, want 1 carrying a.png's bytes again", len(a))
	}
	if r := res[0]; r.Err != nil || r.Turns != 2 {
		t.Errorf("resumed agent 0: turns %d, error %v; want 2 (1 saved, 1 now), no error", r.Turns, r.Err)
	}
	b := rec.with("Describe item B2.")
	if len(b) != 2 || !bytes.Contains(b[0], []byte(base64.StdEncoding.EncodeToString(newB))) {
		t.Errorf("agent 1, its image changed: %d requests, want 2 (afresh from its task) carrying the new b.png", len(b))
	}
	if r := res[1]; r.Err != nil || r.Turns != 2 {
		t.Errorf("agent 1, its image changed: turns %d, error %v; want 2 (run afresh), no error", r.Turns, r.Err)
	}
	if n := len(rec.with("Describe item C3.")); n != 0 {
		t.Errorf("agent 2, its image gone: %d requests, want none", n)
	}
	ae, ok := errors.AsType[*job.AgentError](res[2].Err)
	if !ok || ae.Kind != job.KindInput || !strings.Contains(ae.Error(), "c.png: no such file under the media roots") {
		t.Errorf("agent 2, its image gone: error %v, want kind input naming c.png", res[2].Err)
	}
	st, err := store.State(ctx, "photos", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Media) != 1 || st.Media[0].Hash != hash(newB) {
		t.Errorf("agent 1's new state: media %+v, want the new b.png's hash", st.Media)
	}
}
