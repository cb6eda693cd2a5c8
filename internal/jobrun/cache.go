package jobrun

import (
	"context"
	"fmt"
	"sync"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/respcache"
)

// CacheEnv names the environment variable that sets the response cache
// of a job file without a cache key: "off", or the path of the cache
// file. The file's cache key wins over it.
const CacheEnv = "BATCHAGENT_CACHE"

// openCache opens the response cache of the job file cj, unless the
// cache is off: by noCache (--no-cache, a dry run), by the file's
// `cache: off`, by BATCHAGENT_CACHE=off, or, for a file without a cache
// key, because model runs in this process (the simulator) and costs
// nothing. It returns nil, nil when off. shared, when set, is the store
// the cache keeps its answers in (a worker's, in Redis) instead of a
// file: the file's cache.path and BATCHAGENT_CACHE's path are then
// unused, its ttl and nondeterministic kept.
func openCache(cj *config.Job, model llm.Model, noCache bool, shared respcache.Store, getenv func(string) string) (*respcache.Cache, error) {
	if noCache {
		return nil, nil
	}
	cc := cj.Cache
	if cc == nil {
		if c, ok := model.(llm.Capable); ok && c.Capabilities().InProcess {
			return nil, nil
		}
		switch v := getenv(CacheEnv); v {
		case "":
			cc = &config.CacheConfig{}
		case "off":
			return nil, nil
		default:
			cc = &config.CacheConfig{Path: v}
		}
	}
	if cc.Off {
		return nil, nil
	}
	cfg := respcache.Config{Path: cc.Path, TTL: cc.TTL, Nondeterministic: cc.Nondeterministic}
	if shared != nil {
		c, err := respcache.New(shared, cfg)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		return c, nil
	}
	c, err := respcache.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return c, nil
}

// AgentTally returns, for a job with a response cache, the hook a worker
// runs each agent under (queue.Job.Agent): the agent's context carrying a
// respcache.Tally of its own, and the function that adds the tally's
// counts to the agent's result (cached_calls, saved_tokens), as a local
// run's cacheTallies does. Nil when the job has no cache.
func (j *Job) AgentTally() func(context.Context, int) (context.Context, func(*job.Result)) {
	if j.Cache == nil {
		return nil
	}
	return func(ctx context.Context, _ int) (context.Context, func(*job.Result)) {
		t := new(respcache.Tally)
		return respcache.WithTally(ctx, t), func(r *job.Result) {
			calls, saved := t.Counts()
			r.CachedCalls += calls
			r.SavedTokens += saved.Total()
		}
	}
}

// cacheTallies counts the cached calls of each agent of a run: a
// agent.Scope that gives each agent a respcache.Tally, wrapping the
// Observer the run already had (the tracer's), if any. With a checkpoint
// store (see checkpointer), the counts of a resumed agent's earlier runs
// are added.
type cacheTallies struct {
	next agent.Observer // nil: none; set before the run starts
	mu   sync.Mutex
	by   map[int]*respcache.Tally // by input index, until the result is written
	base map[int]cachedCounts     // by input index: the counts of the agent's state as saved, before this run's
}

// cachedCounts are an agent's cached calls and the tokens they saved.
type cachedCounts struct {
	calls int
	saved int64
}

// newCacheTallies returns the tallies of a run; set next before it
// starts.
func newCacheTallies() *cacheTallies {
	return &cacheTallies{by: make(map[int]*respcache.Tally), base: make(map[int]cachedCounts)}
}

// Agent gives the agent of input index its tally, under next's scope
// when next is a Scope.
func (c *cacheTallies) Agent(ctx context.Context, jobID string, index int) (context.Context, func(job.Result)) {
	end := func(job.Result) {}
	if sc, ok := c.next.(agent.Scope); ok {
		ctx, end = sc.Agent(ctx, jobID, index)
	}
	t := new(respcache.Tally)
	c.mu.Lock()
	c.by[index] = t
	c.mu.Unlock()
	return respcache.WithTally(ctx, t), end
}

// fill sets the cached calls and tokens saved of r from its agent's
// tally and its earlier runs' counts, and forgets them. A result
// restored from the checkpoint (no tally) keeps its saved counts.
func (c *cacheTallies) fill(r *job.Result) {
	c.mu.Lock()
	t, base := c.by[r.Index], c.base[r.Index]
	delete(c.by, r.Index)
	delete(c.base, r.Index)
	c.mu.Unlock()
	if t == nil {
		return
	}
	calls, saved := t.Counts()
	r.CachedCalls, r.SavedTokens = base.calls+calls, base.saved+saved.Total()
}

// add sets the counts of st to those it was saved with plus its agent's
// tally in this run, noting the former for fill.
func (c *cacheTallies) add(st *agent.State) {
	c.mu.Lock()
	t := c.by[st.Index]
	c.base[st.Index] = cachedCounts{st.CachedCalls, st.SavedTokens}
	c.mu.Unlock()
	if t == nil {
		return
	}
	calls, saved := t.Counts()
	st.CachedCalls += calls
	st.SavedTokens += saved.Total()
}

// checkpointer returns the run's store s saving each agent's cached
// calls with its state (agent.State.CachedCalls), so that a resumed
// agent's result counts those of its earlier runs. The engine's state
// keeps the counts it was loaded with: each save adds this run's.
func (c *cacheTallies) checkpointer(s *outfile.Store) *tallyStore {
	return &tallyStore{Store: s, t: c}
}

// tallyStore is a run's checkpoint store that saves its agents' cached
// calls with their states.
type tallyStore struct {
	*outfile.Store
	t *cacheTallies
}

// Save saves st with its cached calls.
func (s *tallyStore) Save(ctx context.Context, st agent.State) error {
	s.t.add(&st) // st is a copy
	return s.Store.Save(ctx, st)
}

// SaveAsync saves the final state st with its cached calls. The engine's
// own st gets them: it is final, and not run again.
func (s *tallyStore) SaveAsync(st *agent.State, done func(error)) {
	s.t.add(st)
	s.Store.SaveAsync(st, done)
}

// Turn is next's, when there is one.
func (c *cacheTallies) Turn(ctx context.Context, turn int) (context.Context, func(*llm.Response, error)) {
	if c.next == nil {
		return ctx, func(*llm.Response, error) {}
	}
	return c.next.Turn(ctx, turn)
}

// ModelCall is next's, when there is one.
func (c *cacheTallies) ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(*llm.Response, error)) {
	if c.next == nil {
		return ctx, func(*llm.Response, error) {}
	}
	return c.next.ModelCall(ctx, turn, req)
}

// Tool is next's, when there is one.
func (c *cacheTallies) Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(string, error)) {
	if c.next == nil {
		return ctx, func(string, error) {}
	}
	return c.next.Tool(ctx, turn, call)
}

// Retry is next's, when there is one.
func (c *cacheTallies) Retry(ctx context.Context, turn int, feedback string) {
	if c.next != nil {
		c.next.Retry(ctx, turn, feedback)
	}
}

// cacheLine is the summary's cache row: the calls answered from the
// cache and the tokens (and, at a known price, dollars) they saved.
func cacheLine(st respcache.Stats, cost func(llm.Usage) (float64, bool)) string {
	v := fmt.Sprintf("%d calls answered from the cache, %s tokens", st.Hits, count(st.Saved.Total()))
	if usd, ok := cost(st.Saved); ok {
		v += fmt.Sprintf(" and $%.4f", usd)
	}
	v += " saved"
	if st.Errors > 0 {
		v += fmt.Sprintf(" (%d cache reads or writes failed)", st.Errors)
	}
	return v
}
