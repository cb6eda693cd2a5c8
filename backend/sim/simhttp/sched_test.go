package simhttp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/oaiwire"
)

// Internal tests of the server's timing model: the scheduler is driven
// through enqueue and seq.wait, without sockets, inside synctest bubbles
// where its steps take fake time.

// runServer starts s.Run in the current bubble and returns the function
// that stops it and waits for it.
func runServer(t *testing.T, cfg Config) (*Server, func()) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1) // Run's result, read by stop
	go func() { done <- s.Run(ctx) }()
	synctest.Wait() // Run is idle, accepting requests
	return s, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	}
}

// chat is a request of a system and a user message.
func chat(system, user string, maxTokens int) *oaiwire.Request {
	cr := &oaiwire.Request{Messages: []oaiwire.Message{
		{Role: "system", Content: oaiwire.TextContent(system)},
		{Role: "user", Content: oaiwire.TextContent(user)},
	}}
	if maxTokens > 0 {
		cr.MaxTokens = &maxTokens
	}
	return cr
}

// sizedChat is chat with the system message padded so the prompt is
// exactly tokens tokens long.
func sizedChat(t *testing.T, head, user string, tokens, maxTokens int) *oaiwire.Request {
	t.Helper()
	_, prompt, _, _ := decode(chat(head, user, 0))
	pad := tokens*sim.BytesPerToken - len(prompt)
	if pad < 0 {
		t.Fatalf("prompt of %q is longer than %d tokens", head, tokens)
	}
	return chat(head+strings.Repeat("x", pad), user, maxTokens)
}

// sharedPrefix returns the system message whose rendering is exactly
// tokens tokens.
func sharedPrefix(tokens int) string {
	const frame = len("<|im_start|>system\n<|im_end|>\n")
	return strings.Repeat("s", tokens*sim.BytesPerToken-frame)
}

func prepareAll(t *testing.T, s *Server, crs ...*oaiwire.Request) []*job {
	t.Helper()
	jobs := make([]*job, len(crs))
	for i, cr := range crs {
		j, apiErr, err := s.prepare(t.Context(), cr)
		if err != nil || apiErr != nil {
			t.Fatalf("prepare(request %d) = %v, %v", i, apiErr, err)
		}
		jobs[i] = j
	}
	return jobs
}

// timing is what a burst of requests measured.
type timing struct {
	ttft   []time.Duration // time to first token, by arrival
	end    []time.Duration // time to the last token
	cached []int           // cached prompt tokens
}

// burst sends jobs at once (in order) and waits for all of them.
func burst(t *testing.T, s *Server, jobs []*job) timing {
	t.Helper()
	qs := make([]*seq, len(jobs))
	for i, j := range jobs {
		qs[i] = j.q
	}
	tm := timing{ttft: make([]time.Duration, len(jobs)), end: make([]time.Duration, len(jobs)), cached: make([]int, len(jobs))}
	start := time.Now()
	if err := s.enqueue(qs...); err != nil {
		t.Fatalf("enqueue(%d sequences) = %v", len(qs), err)
	}
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Go(func() {
			if _, _, _, err := q.wait(t.Context(), 0); err != nil {
				t.Errorf("sequence %d: wait = %v", i, err)
				return
			}
			tm.ttft[i] = time.Since(start)
			_, cached, _, err := q.wait(t.Context(), q.total-1)
			if err != nil {
				t.Errorf("sequence %d: wait = %v", i, err)
			}
			tm.end[i], tm.cached[i] = time.Since(start), cached
		})
	}
	wg.Wait()
	return tm
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// within reports whether got is within ±frac of want.
func within(got, want time.Duration, frac float64) bool {
	return float64(got) >= float64(want)*(1-frac) && float64(got) <= float64(want)*(1+frac)
}

// TestServerCalibration checks the default timing model against the
// published vLLM measurements in BENCHMARKS.md (A10G, Qwen2.5-7B),
// within ±20 %.
func TestServerCalibration(t *testing.T) {
	t.Parallel()
	cfg := Config{Model: sim.Config{ToolTurns: -1}, MaxQueue: -1}

	t.Run("uncached prompts queue linearly", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, cfg)
			defer stop()
			crs := make([]*oaiwire.Request, 100)
			for i := range crs {
				// Distinct from the first block: nothing is shared.
				crs[i] = sizedChat(t, fmt.Sprintf("Request %03d. ", i), "Go on.", 2547, 0)
			}
			jobs := prepareAll(t, s, crs...)
			if jobs[0].q.prompt != 2547 {
				t.Fatalf("prompt tokens = %d, want 2547", jobs[0].q.prompt)
			}
			tm := burst(t, s, jobs)
			t.Logf("uncached 2,547-token prompts: #1 TTFT %v, #50 %v, p50 of 100 %v", tm.ttft[0], tm.ttft[49], median(tm.ttft))
			for _, c := range []struct {
				name      string
				got, want time.Duration
			}{
				{"TTFT of #1 (one prefill)", tm.ttft[0], 600 * time.Millisecond},
				{"TTFT of #50", tm.ttft[49], 29 * time.Second},
				{"TTFT p50 at N = 100", median(tm.ttft), 28700 * time.Millisecond},
			} {
				if !within(c.got, c.want, 0.2) {
					t.Errorf("%s = %v, want %v ± 20%%", c.name, c.got, c.want)
				}
			}
			for i, c := range tm.cached {
				if c != 0 {
					t.Errorf("request %d: cached tokens = %d, want 0", i, c)
				}
			}
		})
	})

	t.Run("shared prefix cached", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, cfg)
			defer stop()
			prefix := sharedPrefix(2047)
			// The first request prefills the prefix: cold, it pays in full.
			first := prepareAll(t, s, chat(prefix, "Warm up.", 0))
			warm := burst(t, s, first)
			if want := time.Duration(first[0].q.prompt) * DefaultPrefillPerToken; !within(warm.ttft[0], want, 0.05) || warm.cached[0] != 0 {
				t.Errorf("cold request: TTFT %v, cached %d; want about %v, 0", warm.ttft[0], warm.cached[0], want)
			}
			// 100 tasks at once, each about 20 tokens after the shared
			// prefix, with short answers (max_tokens 4), as a TTFT probe
			// sends. Past the 16th request TTFT is set by how fast the 16
			// slots turn over, so it grows with the answers' length: the
			// sim's usual 14-token answers give a p50 of about 1.07 s, and
			// 64 or more slots about 0.25 s whatever the length.
			crs := make([]*oaiwire.Request, 100)
			for i := range crs {
				crs[i] = chat(prefix, fmt.Sprintf("Task %d: summarise the findings.", i), 4)
			}
			jobs := prepareAll(t, s, crs...)
			tm := burst(t, s, jobs)
			uncached := jobs[0].q.prompt - tm.cached[0]
			t.Logf("2,047-token prefix cached: prompt %d tokens, %d cached, %d prefilled (%v); TTFT #1 %v, p50 %v, max %v",
				jobs[0].q.prompt, tm.cached[0], uncached, time.Duration(uncached)*DefaultPrefillPerToken,
				tm.ttft[0], median(tm.ttft), slices.Max(tm.ttft))
			if got, want := median(tm.ttft), 500*time.Millisecond; !within(got, want, 0.2) {
				t.Errorf("TTFT p50 at N = 100 = %v, want %v ± 20%%", got, want)
			}
			// Each further request adds about 5 ms of prefill.
			if d := time.Duration(uncached) * DefaultPrefillPerToken; !within(d, 5*time.Millisecond, 0.2) {
				t.Errorf("prefill per cached request = %v (%d tokens), want 5ms ± 20%%", d, uncached)
			}
			for i, c := range tm.cached {
				if c < 2032 { // the prefix's full blocks
					t.Errorf("request %d: cached tokens = %d, want >= 2032", i, c)
				}
			}
			st := s.Stats()
			if share := float64(st.CachedTokens) / float64(st.PromptTokens); share < 0.9 {
				t.Errorf("cached share = %.3f, want >= 0.9", share)
			}
		})
	})
}

// TestServerStepTiming checks the time of each step for a lone sequence:
// prefill chunks, then one decode step per further token.
func TestServerStepTiming(t *testing.T) {
	t.Parallel()
	const pp, step, perSeq = 100 * time.Microsecond, 10 * time.Millisecond, time.Millisecond
	cfg := Config{Model: sim.Config{ToolTurns: -1}, PrefillPerToken: pp, DecodeStep: step, DecodeStepPerSeq: perSeq}
	tests := []struct {
		name      string
		tokens    int // prompt
		maxTokens int
	}{
		{"short prompt", 40, 0},
		{"two chunks", 1000, 0},
		{"five chunks, capped", 2500, 3},
		{"one token", 600, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s, stop := runServer(t, cfg)
				defer stop()
				jobs := prepareAll(t, s, sizedChat(t, "Step. ", "Go.", tt.tokens, tt.maxTokens))
				tm := burst(t, s, jobs)
				var want time.Duration
				for left := tt.tokens; left > 0; left -= chunkTokens {
					want += max(step+perSeq, time.Duration(min(left, chunkTokens))*pp)
				}
				if tm.ttft[0] != want {
					t.Errorf("TTFT = %v, want %v", tm.ttft[0], want)
				}
				total := jobs[0].q.total
				if tt.maxTokens > 0 && total != tt.maxTokens {
					t.Errorf("completion tokens = %d, want max_tokens %d", total, tt.maxTokens)
				}
				want += time.Duration(total-1) * max(step+perSeq, pp)
				if tm.end[0] != want {
					t.Errorf("time to last token = %v, want %v (%d tokens)", tm.end[0], want, total)
				}
			})
		})
	}
}

// TestServerBatchStep checks that a step is one forward pass over the
// batch: decode-bound with a small batch, compute-bound when it carries a
// prefill chunk.
func TestServerBatchStep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const pp, step, perSeq = 100 * time.Microsecond, 10 * time.Millisecond, time.Millisecond
		s, stop := runServer(t, Config{Model: sim.Config{ToolTurns: -1}, PrefillPerToken: pp, DecodeStep: step, DecodeStepPerSeq: perSeq})
		defer stop()
		// Two 32-token prompts in one step, then a 1,024-token one.
		jobs := prepareAll(t, s,
			sizedChat(t, "A. ", "Go.", 32, 0), sizedChat(t, "B. ", "Go.", 32, 0), sizedChat(t, "C. ", "Go.", 1024, 0))
		tm := burst(t, s, jobs)
		// Step 1: A, B and 448 tokens of C, a batch of 3, compute-bound;
		// A and B emit their first tokens. Step 2: 512 more of C, and A and
		// B decode. Step 3: C's last 64 tokens and two decoding sequences:
		// memory-bound.
		step1 := max(step+3*perSeq, 512*pp)
		step2 := max(step+3*perSeq, (512+2)*pp)
		step3 := max(step+3*perSeq, (64+2)*pp)
		if want := step1; tm.ttft[0] != want || tm.ttft[1] != want {
			t.Errorf("TTFT of A, B = %v, %v, want %v", tm.ttft[0], tm.ttft[1], want)
		}
		if want := step1 + step2 + step3; tm.ttft[2] != want {
			t.Errorf("TTFT of C = %v, want %v", tm.ttft[2], want)
		}
	})
}

// TestServerPrefixReuse checks when a prompt's blocks become reusable:
// only once its prefill has finished, and never for a prefill abandoned
// half-way.
func TestServerPrefixReuse(t *testing.T) {
	t.Parallel()
	prefix := sharedPrefix(1600)
	t.Run("after the first prefill", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, Config{Model: sim.Config{ToolTurns: -1}})
			defer stop()
			tm := burst(t, s, prepareAll(t, s, chat(prefix, "One.", 0), chat(prefix, "Two.", 0)))
			if tm.cached[0] != 0 || tm.cached[1] != 1600 {
				t.Errorf("cached tokens = %v, want [0 1600]", tm.cached)
			}
		})
	})
	t.Run("abandoned prefill", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, Config{Model: sim.Config{ToolTurns: -1}})
			defer stop()
			a := prepareAll(t, s, chat(prefix, "One.", 0))[0]
			if err := s.enqueue(a.q); err != nil {
				t.Fatal(err)
			}
			time.Sleep(DefaultPrefillPerToken * chunkTokens) // one chunk of A's prefill
			s.leave(a.q)
			tm := burst(t, s, prepareAll(t, s, chat(prefix, "Two.", 0)))
			if tm.cached[0] != 0 {
				t.Errorf("cached tokens after an abandoned prefill = %d, want 0", tm.cached[0])
			}
		})
	})
	t.Run("no prefix cache", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, Config{Model: sim.Config{ToolTurns: -1}, NoPrefixCache: true})
			defer stop()
			tm := burst(t, s, prepareAll(t, s, chat(prefix, "One.", 0), chat(prefix, "Two.", 0)))
			if tm.cached[0] != 0 || tm.cached[1] != 0 {
				t.Errorf("cached tokens = %v, want [0 0]", tm.cached)
			}
		})
	})
}

// TestServerSlots checks admission: MaxSeqs sequences run, the rest wait
// in arrival order, and one that leaves frees its slot at the next step.
func TestServerSlots(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, stop := runServer(t, Config{Model: sim.Config{ToolTurns: -1}, MaxSeqs: 1, MaxQueue: 2})
		defer stop()
		jobs := prepareAll(t, s, chat("A", "long", 0), chat("B", "next", 0), chat("C", "last", 0), chat("D", "over", 0))
		if err := s.enqueue(jobs[0].q); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // A runs
		if err := s.enqueue(jobs[1].q, jobs[2].q); err != nil {
			t.Fatal(err)
		}
		if err := s.enqueue(jobs[3].q); !errors.Is(err, errQueueFull) {
			t.Errorf("enqueue beyond MaxSeqs + MaxQueue = %v, want errQueueFull", err)
		}
		synctest.Wait()
		if st := s.Stats(); st.Running != 1 || st.Waiting != 2 || st.Rejected != 1 {
			t.Errorf("Stats() = %+v, want 1 running, 2 waiting, 1 rejected", st)
		}
		// B leaves the queue; A leaves the batch after its first token.
		s.leave(jobs[1].q)
		if st := s.Stats(); st.Waiting != 1 {
			t.Errorf("waiting after B left = %d, want 1", st.Waiting)
		}
		if _, _, _, err := jobs[0].q.wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		left := time.Now()
		s.leave(jobs[0].q)
		if _, _, _, err := jobs[2].q.wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		// A's last step ends, then C's prompt fills one step.
		if got, max := time.Since(left), 2*(DefaultDecodeStep+DefaultDecodeStepPerSeq); got > max {
			t.Errorf("C's first token came %v after A left, want <= %v", got, max)
		}
		if st := s.Stats(); st.Running != 1 || st.Waiting != 0 {
			t.Errorf("Stats() = %+v, want 1 running, 0 waiting", st)
		}
	})
}

// TestServerStop checks that stopping Run fails what is queued or
// running, and that a server runs once.
func TestServerStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, stop := runServer(t, Config{Model: sim.Config{ToolTurns: -1}, MaxSeqs: 1})
		if err := s.Run(t.Context()); !errors.Is(err, ErrServerStarted) {
			t.Errorf("second Run() = %v, want ErrServerStarted", err)
		}
		jobs := prepareAll(t, s, chat("A", "one", 0), chat("B", "two", 0))
		if err := s.enqueue(jobs[0].q, jobs[1].q); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		stop()
		for i, j := range jobs {
			if _, _, done, err := j.q.wait(t.Context(), j.q.total); !done || !errors.Is(err, errStopped) {
				t.Errorf("sequence %d after stop: done %v, err %v; want true, errStopped", i, done, err)
			}
		}
		if err := s.enqueue(prepareAll(t, s, chat("C", "late", 0))[0].q); !errors.Is(err, errStopped) {
			t.Errorf("enqueue after stop = %v, want errStopped", err)
		}
		if err := s.Run(t.Context()); !errors.Is(err, ErrServerStarted) {
			t.Errorf("Run() after stop = %v, want ErrServerStarted", err)
		}
	})
}

// cacheBlocks runs sequences through c as the server does: each holds
// its cached leading blocks, reserves the rest, caches its blocks and
// ends. It returns the cached leading blocks of each.
func cacheBlocks(t *testing.T, c *kvCache, prompts ...[]uint64) []int {
	t.Helper()
	hits := make([]int, len(prompts))
	for i, p := range prompts {
		n := c.pin(p, 0)
		if !c.reserve(len(p) - n) {
			t.Fatalf("reserve(%d) for prompt %d: no room", len(p)-n, i)
		}
		for _, h := range p[n:] {
			c.add(h)
		}
		c.unpin(p)
		hits[i] = n
	}
	return hits
}

func TestKVCache(t *testing.T) {
	t.Parallel()
	t.Run("prefix reused within capacity", func(t *testing.T) {
		t.Parallel()
		c := newKVCache(4)
		got := cacheBlocks(t, c, []uint64{1, 2, 3}, []uint64{1, 2, 3}, []uint64{1, 2, 9}, []uint64{8, 7, 6})
		if want := []int{0, 3, 2, 0}; !slices.Equal(got, want) {
			t.Errorf("cached leading blocks = %v, want %v", got, want)
		}
		// 1,2,3 and 9 fill the cache; 8,7,6 need three blocks: the least
		// recently used go, 3 then 9 then 2, and 1 stays.
		if n := c.evictions.Load(); n != 3 || !c.wasEvicted(3) || !c.wasEvicted(9) || !c.wasEvicted(2) || c.wasEvicted(1) {
			t.Errorf("evictions = %d (3, 9, 2, 1 evicted: %v %v %v %v), want 3 (true true true false)",
				n, c.wasEvicted(3), c.wasEvicted(9), c.wasEvicted(2), c.wasEvicted(1))
		}
	})
	t.Run("least recently used evicted first", func(t *testing.T) {
		t.Parallel()
		c := newKVCache(4)
		cacheBlocks(t, c, []uint64{1, 2}, []uint64{3, 4})
		// Using 1,2 again makes 3,4 the least recently used: they go first,
		// the end of the chain (4) before its head (3).
		cacheBlocks(t, c, []uint64{1, 2})
		cacheBlocks(t, c, []uint64{5})
		if c.wasEvicted(3) || !c.wasEvicted(4) || c.wasEvicted(1) || c.wasEvicted(2) {
			t.Errorf("after one eviction: evicted 1..4 = %v %v %v %v, want only 4", c.wasEvicted(1), c.wasEvicted(2), c.wasEvicted(3), c.wasEvicted(4))
		}
		cacheBlocks(t, c, []uint64{6})
		if !c.wasEvicted(3) || c.wasEvicted(1) {
			t.Errorf("after two evictions: 3 evicted %v, 1 evicted %v; want true, false", c.wasEvicted(3), c.wasEvicted(1))
		}
		if got := cacheBlocks(t, c, []uint64{1, 2}); got[0] != 2 {
			t.Errorf("prefix 1,2 after evictions: %d blocks cached, want 2", got[0])
		}
		// Caching a block again clears its eviction mark.
		cacheBlocks(t, c, []uint64{3})
		if c.wasEvicted(3) {
			t.Error("block 3 cached again is still marked evicted")
		}
	})
	t.Run("held blocks never evicted", func(t *testing.T) {
		t.Parallel()
		c := newKVCache(4)
		running := []uint64{1, 2, 3}
		if n := c.pin(running, 0); n != 0 || !c.reserve(3) {
			t.Fatal("empty cache: cannot reserve 3 of 4 blocks")
		}
		for _, h := range running {
			c.add(h)
		}
		if c.reserve(2) {
			t.Fatal("reserve(2) with 3 of 4 blocks held succeeded, want no room")
		}
		if c.evictions.Load() != 0 || c.pin(running, 0) != 3 {
			t.Errorf("a held block was evicted (evictions %d)", c.evictions.Load())
		}
		c.unpin(running) // the extra pin above
		c.unpin(running) // the sequence ends
		if !c.reserve(2) {
			t.Fatal("reserve(2) after the sequence ended: no room")
		}
		if n := c.evictions.Load(); n != 1 || !c.wasEvicted(3) {
			t.Errorf("evictions = %d (3 evicted %v), want 1, the chain's end", n, c.wasEvicted(3))
		}
	})
}

func TestBlockHashes(t *testing.T) {
	t.Parallel()
	a := []byte(strings.Repeat("a", 64*3+10))
	b := append([]byte(strings.Repeat("a", 64*2)), strings.Repeat("b", 64+10)...)
	ha, hb := blockHashes(a), blockHashes(b)
	if len(ha) != 3 || len(hb) != 3 {
		t.Fatalf("blockHashes: %d and %d blocks, want 3 (full blocks only)", len(ha), len(hb))
	}
	if ha[0] != hb[0] || ha[1] != hb[1] || ha[2] == hb[2] {
		t.Errorf("blockHashes(a), (b) = %x, %x; want the first two equal, the third different", ha, hb)
	}
	// Chained: the same block after different prefixes hashes differently.
	c := append([]byte(strings.Repeat("c", 64)), strings.Repeat("a", 64)...)
	if hc := blockHashes(c); hc[1] == ha[1] {
		t.Errorf("block 1 after a different block 0 hashes the same: %x", hc[1])
	}
}

// TestSeqWake checks that a token wakes the handler only when it is the
// one the handler waits for: each token of a stream, the last token of a
// plain answer.
func TestSeqWake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream bool
		want   []bool // whether each token wakes the handler
	}{
		{"stream", true, []bool{true, true, true, true}},
		{"plain", false, []bool{false, false, false, true}},
		{"one token", false, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := newSeq(10, nil, len(tt.want))
			// A done ctx makes wait store its threshold and return at once.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var got []bool
			for k := range tt.want {
				have := q.total - 1
				if tt.stream {
					have = k
				}
				if _, _, done, err := q.wait(ctx, have); done || !errors.Is(err, context.Canceled) {
					t.Fatalf("wait(done ctx, %d) before token %d = done %v, err %v; want false, context.Canceled", have, k+1, done, err)
				}
				if done := q.emit(); done != (k == len(tt.want)-1) {
					t.Errorf("emit() of token %d of %d = %v, want %v", k+1, len(tt.want), done, !done)
				}
				select {
				case <-q.notify:
					got = append(got, true)
				default:
					got = append(got, false)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("wakes per token = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSeqFail checks that fail ends a sequence and wakes its handler,
// whatever it waits for.
func TestSeqFail(t *testing.T) {
	t.Parallel()
	q := newSeq(10, nil, 3)
	q.emit()
	q.fail(errStopped)
	emitted, _, done, err := q.wait(t.Context(), q.total)
	if emitted != 1 || !done || !errors.Is(err, errStopped) {
		t.Errorf("wait after fail = %d, %v, %v; want 1, true, errStopped", emitted, done, err)
	}
	if len(q.notify) != 1 {
		t.Errorf("fail left %d signals, want 1", len(q.notify))
	}
}

// TestServerKVCache checks the finite KV cache: a prefix re-used within
// capacity is cached, one evicted since is recomputed and counted, and a
// running sequence's blocks are never evicted (a sequence that does not
// fit waits for room instead).
func TestServerKVCache(t *testing.T) {
	t.Parallel()
	cfg := Config{Model: sim.Config{ToolTurns: -1}, KVCacheTokens: 1024} // 64 blocks
	t.Run("reuse, eviction, recompute", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, cfg)
			defer stop()
			a := sharedPrefix(400) // 25 blocks
			first := burst(t, s, prepareAll(t, s, chat(a, "One.", 0)))
			again := burst(t, s, prepareAll(t, s, chat(a, "Two.", 0)))
			if first.cached[0] != 0 || again.cached[0] != 400 {
				t.Errorf("cached tokens of A, then A again = %d, %d; want 0, 400", first.cached[0], again.cached[0])
			}
			if st := s.Stats(); st.Evictions != 0 || st.RecomputedTokens != 0 || st.LostPrefixes != 0 {
				t.Errorf("within capacity: evictions %d, recomputed %d, lost %d; want 0, 0, 0", st.Evictions, st.RecomputedTokens, st.LostPrefixes)
			}
			// B needs 50 of the 64 blocks: A's least recently used blocks go.
			burst(t, s, prepareAll(t, s, chat(strings.Repeat("b", 780*sim.BytesPerToken), "Three.", 0)))
			st := s.Stats()
			if st.Evictions == 0 {
				t.Fatalf("evictions after B = 0, want > 0")
			}
			last := burst(t, s, prepareAll(t, s, chat(a, "Four.", 0)))
			st2 := s.Stats()
			lostBlocks := 25 - last.cached[0]/blockTokens
			if last.cached[0] >= 400 || st2.RecomputedTokens != int64(lostBlocks*blockTokens) || st2.LostPrefixes != 1 {
				t.Errorf("A after eviction: cached %d, recomputed %d, lost %d; want < 400, %d, 1",
					last.cached[0], st2.RecomputedTokens, st2.LostPrefixes, lostBlocks*blockTokens)
			}
			if want := st2.PromptTokens - st2.CachedTokens; st2.PrefillTokens != want {
				t.Errorf("prefill tokens = %d, want prompt - cached = %d", st2.PrefillTokens, want)
			}
			if st2.BusyTime <= 0 || st2.ServiceTime < st2.BusyTime {
				t.Errorf("busy %v, service %v; want > 0 and service >= busy (one sequence at a time)", st2.BusyTime, st2.ServiceTime)
			}
		})
	})
	t.Run("running sequence not evicted", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s, stop := runServer(t, cfg)
			defer stop()
			// Each needs 38+ blocks: only one fits at a time.
			jobs := prepareAll(t, s, chat(strings.Repeat("a", 600*sim.BytesPerToken), "One.", 0),
				chat(strings.Repeat("b", 600*sim.BytesPerToken), "Two.", 0))
			tm := burst(t, s, jobs)
			if tm.ttft[1] < tm.end[0] {
				t.Errorf("second sequence's first token at %v, before the first ended (%v): both held the cache", tm.ttft[1], tm.end[0])
			}
			if st := s.Stats(); st.Evictions == 0 {
				t.Error("evictions = 0, want the first's blocks evicted once it ended")
			}
		})
	})
	t.Run("too large", func(t *testing.T) {
		t.Parallel()
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, apiErr, err := s.prepare(t.Context(), chat(strings.Repeat("a", 1100*sim.BytesPerToken), "One.", 0))
		if err != nil || apiErr == nil || apiErr.status != 400 || !strings.Contains(apiErr.message, "KV cache") {
			t.Errorf("prepare(1,100-token prompt, 1,024-token cache) = %+v, %v; want a 400 naming the KV cache", apiErr, err)
		}
	})
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		for _, c := range []Config{{KVCacheTokens: -1}, {KVCacheTokens: 8}, {KVCacheTokens: 1024, NoPrefixCache: true}} {
			if _, err := New(c); err == nil || !strings.Contains(err.Error(), "kv_cache_tokens") {
				t.Errorf("New(%+v) = %v, want an error naming kv_cache_tokens", c, err)
			}
		}
	})
}

// TestServerCallOverhead checks that CallOverhead is paid once per
// request, in the step its prefill starts, and that on one sequence the
// requests pay it one after the other.
func TestServerCallOverhead(t *testing.T) {
	t.Parallel()
	const pp, step, overhead = 100 * time.Microsecond, 10 * time.Millisecond, 150 * time.Millisecond
	cfg := Config{Model: sim.Config{ToolTurns: -1}, MaxSeqs: 1, NoPrefixCache: true,
		PrefillPerToken: pp, DecodeStep: step, DecodeStepPerSeq: 1, CallOverhead: overhead}
	synctest.Test(t, func(t *testing.T) {
		s, stop := runServer(t, cfg)
		defer stop()
		jobs := prepareAll(t, s, sizedChat(t, "Step. ", "A.", 40, 2), sizedChat(t, "Step. ", "B.", 40, 2))
		tm := burst(t, s, jobs)
		// Each: overhead + one prefill step (decode-bound) for the first
		// token, then one decode step for the second.
		one := overhead + (step + 1) + (step + 1)
		if want := overhead + step + 1; tm.ttft[0] != want {
			t.Errorf("first TTFT = %v, want %v (overhead and one step)", tm.ttft[0], want)
		}
		if tm.end[0] != one {
			t.Errorf("first done at %v, want %v", tm.end[0], one)
		}
		if want := 2 * one; tm.end[1] != want {
			t.Errorf("second done at %v, want %v: one slot, so it pays its overhead after the first", tm.end[1], want)
		}
	})
}
