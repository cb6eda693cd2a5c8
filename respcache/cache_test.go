package respcache_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/respcache"
)

func open(t *testing.T, cfg respcache.Config) *respcache.Cache {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "responses.db")
	}
	c, err := respcache.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newSim(t *testing.T, cfg sim.Config) *sim.Model {
	t.Helper()
	m, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func request(task string) *llm.Request {
	return &llm.Request{
		Model:    "sim",
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "Answer."}, {Role: llm.RoleUser, Content: task}},
		Output:   &llm.OutputSpec{Schema: []byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)},
	}
}

func TestGenerateAnswersFromCache(t *testing.T) {
	t.Parallel()
	c := open(t, respcache.Config{})
	s := newSim(t, sim.Config{Seed: 1})
	m := c.Wrap(s)
	ctx := t.Context()
	first, err := m.Generate(ctx, request("item 1"))
	if err != nil {
		t.Fatal(err)
	}
	var tally respcache.Tally
	second, err := m.Generate(respcache.WithTally(ctx, &tally), request("item 1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Calls; got != 1 {
		t.Errorf("simulator saw %d calls, want 1", got)
	}
	if diff := cmp.Diff(first.Message, second.Message); diff != "" {
		t.Errorf("cached message differs (-first +cached):\n%s", diff)
	}
	if second.Usage != (llm.Usage{}) || second.FinishReason != first.FinishReason {
		t.Errorf("cached usage %+v finish %q, want zero usage and %q", second.Usage, second.FinishReason, first.FinishReason)
	}
	if calls, saved := tally.Counts(); calls != 1 || saved != first.Usage {
		t.Errorf("tally = %d calls, %+v saved; want 1, %+v", calls, saved, first.Usage)
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 1 || st.Stored != 1 || st.Errors != 0 || st.Saved != first.Usage {
		t.Errorf("stats = %+v, want 1 hit, 1 miss, 1 stored, saved %+v", st, first.Usage)
	}
	// Another request is a miss.
	if _, err := m.Generate(ctx, request("item 2")); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Calls; got != 2 {
		t.Errorf("simulator saw %d calls after a new request, want 2", got)
	}
}

func TestWrapKeepsInterfaces(t *testing.T) {
	t.Parallel()
	m := open(t, respcache.Config{}).Wrap(newSim(t, sim.Config{}))
	if _, ok := m.(llm.Streamer); !ok {
		t.Error("wrapped simulator is not a Streamer")
	}
	c, ok := m.(llm.Capable)
	if !ok || !c.Capabilities().InProcess {
		t.Error("wrapped simulator lost its Capabilities")
	}
}

func collect(t *testing.T, seq func(func(llm.Event, error) bool)) *llm.Response {
	t.Helper()
	var acc llm.Accumulator
	for ev, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	return acc.Response()
}

func TestStreamReplaysCachedAnswer(t *testing.T) {
	t.Parallel()
	c := open(t, respcache.Config{})
	s := newSim(t, sim.Config{Seed: 2, ToolTurns: 1})
	m := c.Wrap(s).(llm.Streamer)
	req := request("look it up")
	req.Tools = []llm.ToolDef{{Name: "lookup", Parameters: []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
	first := collect(t, m.Stream(t.Context(), req))
	if len(first.Message.ToolCalls) == 0 {
		t.Fatalf("simulator answered %+v, want a tool call", first.Message)
	}
	second := collect(t, m.Stream(t.Context(), req))
	if got := s.Stats().Calls; got != 1 {
		t.Errorf("simulator saw %d calls, want 1", got)
	}
	if diff := cmp.Diff(first.Message, second.Message); diff != "" {
		t.Errorf("replayed message differs (-first +replayed):\n%s", diff)
	}
	if second.FinishReason != llm.FinishToolCalls {
		t.Errorf("replayed finish %q, want tool_calls", second.FinishReason)
	}
	// A stream its consumer stops early is not stored.
	req2 := request("cut short")
	for range m.Stream(t.Context(), req2) {
		break
	}
	collect(t, m.Stream(t.Context(), req2))
	if got := s.Stats().Calls; got != 3 {
		t.Errorf("simulator saw %d calls, want 3 (a stream cut short is not cached)", got)
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	c := open(t, respcache.Config{})
	m := c.Wrap(newSim(t, sim.Config{FailRate: 1}))
	for range 2 {
		if _, err := m.Generate(t.Context(), request("x")); err == nil {
			t.Fatal("Generate succeeded against a failing simulator")
		}
	}
	if st := c.Stats(); st.Hits != 0 || st.Stored != 0 || st.Misses != 2 {
		t.Errorf("stats = %+v, want 2 misses and nothing stored", st)
	}
}

func TestNondeterministicCalls(t *testing.T) {
	t.Parallel()
	hot, seed := 0.7, int64(5)
	for _, c := range []struct {
		name      string
		cfg       respcache.Config
		seed      *int64
		wantCalls int64
	}{
		{"unseeded", respcache.Config{}, nil, 2},
		{"seeded", respcache.Config{}, &seed, 1},
		{"allowed", respcache.Config{Nondeterministic: true}, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, sim.Config{})
			m := open(t, c.cfg).Wrap(s)
			for range 2 {
				req := request("x")
				req.Temperature, req.Seed = &hot, c.seed
				if _, err := m.Generate(t.Context(), req); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.Stats().Calls; got != c.wantCalls {
				t.Errorf("simulator saw %d calls, want %d", got, c.wantCalls)
			}
		})
	}
}

func TestKeyIsCanonical(t *testing.T) {
	t.Parallel()
	a, b := request("x"), request("x")
	b.Output = &llm.OutputSpec{Schema: []byte(`{ "required":["ok"], "properties":{"ok":{"type":"boolean"}}, "type":"object"}`)}
	b.Input = map[string]any{"ignored": true}
	ka, err := respcache.Key(a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := respcache.Key(b)
	if err != nil {
		t.Fatal(err)
	}
	if ka != kb {
		t.Error("key depends on the schema's key order or on Input")
	}
	zero, one := 0.0, 1.0
	for name, change := range map[string]func(r *llm.Request){
		"model":       func(r *llm.Request) { r.Model = "other" },
		"message":     func(r *llm.Request) { r.Messages[1].Content = "y" },
		"tools":       func(r *llm.Request) { r.Tools = []llm.ToolDef{{Name: "t"}} },
		"temperature": func(r *llm.Request) { r.Temperature = &zero },
		"top_p":       func(r *llm.Request) { r.TopP = &one },
		"stop":        func(r *llm.Request) { r.Stop = []string{"END"} },
		"max_tokens":  func(r *llm.Request) { r.MaxTokens = 9 },
		"media":       func(r *llm.Request) { r.Messages[1].Parts = []llm.Part{{Kind: llm.PartImage, Data: []byte{1}}} },
	} {
		r := request("x")
		change(r)
		if k, err := respcache.Key(r); err != nil || k == ka {
			t.Errorf("changing %s keeps the key (err %v)", name, err)
		}
	}
	// Media by their bytes' hash: the same bytes from elsewhere, same key.
	img := func(ref string, data []byte) *llm.Request {
		r := request("x")
		r.Messages[1].Parts = []llm.Part{{Kind: llm.PartImage, Data: data, Ref: ref, MediaType: "image/png"}}
		return r
	}
	k1, _ := respcache.Key(img("a.png", []byte{1, 2}))
	k2, _ := respcache.Key(img("b.png", []byte{1, 2}))
	k3, _ := respcache.Key(img("a.png", []byte{1, 3}))
	if k1 != k2 || k1 == k3 {
		t.Errorf("media keys: same bytes equal %v, other bytes differ %v; want true, true", k1 == k2, k1 != k3)
	}
}

func TestCorruptFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "responses.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := respcache.Open(respcache.Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--no-cache") {
		t.Fatalf("Open of a corrupt file: error %v, want one naming the file and --no-cache", err)
	}
}

// TestSharedFile has two caches on one file, as two processes would
// have, answering and storing at once.
func TestSharedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "responses.db")
	a, b := open(t, respcache.Config{Path: path}), open(t, respcache.Config{Path: path})
	sa, sb := newSim(t, sim.Config{}), newSim(t, sim.Config{})
	ma, mb := a.Wrap(sa), b.Wrap(sb)
	var wg sync.WaitGroup
	for i := range 50 {
		for _, m := range []llm.Model{ma, mb} {
			wg.Go(func() {
				if _, err := m.Generate(context.Background(), request(strings.Repeat("x", i%25))); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if e := a.Stats().Errors + b.Stats().Errors; e != 0 {
		t.Errorf("%d cache errors, want 0", e)
	}
	// Everything is in the file now: a third cache answers all 25.
	c := open(t, respcache.Config{Path: path})
	sc := newSim(t, sim.Config{})
	for i := range 25 {
		if _, err := c.Wrap(sc).Generate(t.Context(), request(strings.Repeat("x", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := sc.Stats().Calls; got != 0 {
		t.Errorf("a third cache on the file passed %d calls through, want 0", got)
	}
}

// TestKeyHoldsExtras: a request's extra fields change the answer, so they
// are part of the key, canonically (key order and spacing within a value
// do not count); a request without extras keeps the key it had.
func TestKeyHoldsExtras(t *testing.T) {
	base := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	with := func(extra map[string]json.RawMessage) string {
		r := *base
		r.Extra = extra
		k, err := respcache.Key(&r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	plain := with(nil)
	if empty := with(map[string]json.RawMessage{}); empty != plain {
		t.Errorf("empty extras key %s, want the plain key %s", empty, plain)
	}
	a := with(map[string]json.RawMessage{"logit_bias": json.RawMessage(`{"1":-100,"2":5}`)})
	b := with(map[string]json.RawMessage{"logit_bias": json.RawMessage(`{ "2": 5, "1": -100 }`)})
	c := with(map[string]json.RawMessage{"logit_bias": json.RawMessage(`{"1":-100,"2":6}`)})
	if a == plain || a != b || a == c {
		t.Errorf("keys: plain %s, a %s, b (a reordered) %s, c (another value) %s; want a = b, all else distinct", plain, a, b, c)
	}
}
