package queue_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/queue"
	"github.com/batchagent/batchagent/respcache"
)

// respRequest is a deterministic request for item task.
func respRequest(task string) *llm.Request {
	return &llm.Request{
		Model:    "sim",
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "Answer."}, {Role: llm.RoleUser, Content: task}},
		Output:   &llm.OutputSpec{Schema: []byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)},
	}
}

// respCache is a worker's response cache: its own Client on url, the
// store under the Client's resp prefix.
func respCache(t *testing.T, url string, ttl time.Duration) *respcache.Cache {
	t.Helper()
	q := openURL(t, url)
	c, err := respcache.New(queue.NewResponseStore(q.Redis(), q.Key("resp")+":"), respcache.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestResponseStoreSharedByWorkers: two workers, each with its own
// connection and model, share answers through Redis: the second's calls
// are answered from the first's, at no cost, and never reach its model.
func TestResponseStoreSharedByWorkers(t *testing.T) {
	_, srv := open(t)
	first, second := respCache(t, srv.URL, time.Hour), respCache(t, srv.URL, time.Hour)
	m1, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := sim.New(sim.Config{Seed: 2}) // another seed: another answer, were it asked
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	want := map[string]*llm.Response{}
	for _, task := range []string{"a", "b", "c"} {
		r, err := first.Wrap(m1).Generate(ctx, respRequest(task))
		if err != nil {
			t.Fatal(err)
		}
		want[task] = r
	}
	var tally respcache.Tally
	for task, w := range want {
		got, err := second.Wrap(m2).Generate(respcache.WithTally(ctx, &tally), respRequest(task))
		if err != nil {
			t.Fatal(err)
		}
		if got.Message.Content != w.Message.Content || got.Usage != (llm.Usage{}) {
			t.Errorf("task %s: second worker got %q (usage %+v), want the first's %q at zero usage", task, got.Message.Content, got.Usage, w.Message.Content)
		}
	}
	if calls, saved := tally.Counts(); calls != 3 || saved.Total() <= 0 {
		t.Errorf("second worker's tally = %d calls, %d tokens saved; want 3 calls, tokens saved", calls, saved.Total())
	}
	if st := second.Stats(); st.Hits != 3 || st.Misses != 0 || st.Errors != 0 {
		t.Errorf("second worker's stats = %+v, want 3 hits, no miss or error", st)
	}
	if st := first.Stats(); st.Stored != 3 {
		t.Errorf("first worker stored %d answers, want 3", st.Stored)
	}
}

// TestResponseStoreTTLAndDamage: an entry expires in Redis after the
// cache's TTL, and a damaged value is a miss (counted), never an answer.
func TestResponseStoreTTLAndDamage(t *testing.T) {
	q, srv := open(t)
	c := respCache(t, srv.URL, 30*time.Second)
	m, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	req := respRequest("ttl")
	if _, err := c.Wrap(m).Generate(ctx, req); err != nil {
		t.Fatal(err)
	}
	key, err := respcache.Key(req)
	if err != nil {
		t.Fatal(err)
	}
	rk := q.Key("resp") + ":" + key
	ttl, err := q.Redis().PTTL(ctx, rk).Result()
	if err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("PTTL(%s) = %v, %v; want within the cache's 30s", rk, ttl, err)
	}
	// A fresh entry whose sum (zeros) is not its answer's.
	wrongSum := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
	wrongSum = append(append(wrongSum, make([]byte, 32)...), `{"message":{"role":"assistant","content":"wrong"},"finish_reason":"stop"}`...)
	for _, v := range []string{"short", string(wrongSum)} {
		if err := q.Redis().Set(ctx, rk, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		before := c.Stats()
		r, err := c.Wrap(m).Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Message.Content == "wrong" || r.Usage == (llm.Usage{}) {
			t.Errorf("damaged value %.10q: answer %q at usage %+v, want the model's, paid", v, r.Message.Content, r.Usage)
		}
		if st := c.Stats(); st.Errors != before.Errors+1 || st.Hits != before.Hits {
			t.Errorf("damaged value %.10q: stats %+v after %+v, want one more error, no hit", v, st, before)
		}
	}
}

// TestResponseStoreRedisDown: with Redis gone mid-run, calls go to the
// model (misses, counted as errors), never failing.
func TestResponseStoreRedisDown(t *testing.T) {
	_, srv := open(t)
	c := respCache(t, srv.URL, 0)
	m, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Wrap(m).Generate(ctx, respRequest("before")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	r, err := c.Wrap(m).Generate(ctx, respRequest("before"))
	if err != nil {
		t.Fatalf("with Redis down: %v, want the model's answer", err)
	}
	if r.Usage == (llm.Usage{}) {
		t.Error("with Redis down: an answer at zero usage, want the model's, paid")
	}
	if st := c.Stats(); st.Errors < 1 || st.Hits != 0 {
		t.Errorf("with Redis down: stats %+v, want errors counted and no hit", st)
	}
}

// TestRunNoCache: a run created with NoCache (the coordinator's
// --no-cache) says so to the workers that read it; others do not.
func TestRunNoCache(t *testing.T) {
	q, _ := open(t)
	for _, noCache := range []bool{true, false} {
		id := "nocache-" + map[bool]string{true: "on", false: "off"}[noCache]
		if _, _, err := q.CreateRun(t.Context(), queue.Run{ID: id, Job: []byte("id: x\n"), JobPath: "/jobs/x.yaml", NoCache: noCache}); err != nil {
			t.Fatal(err)
		}
		st, err := q.RunStatus(t.Context(), id)
		if err != nil || st.NoCache != noCache {
			t.Errorf("RunStatus(%s) = NoCache %v, %v; want %v", id, st.NoCache, err, noCache)
		}
	}
}
