package jobrun

import (
	"context"
	"fmt"
	"sync"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/config"
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
// nothing. It returns nil, nil when off.
func openCache(cj *config.Job, model llm.Model, noCache bool, getenv func(string) string) (*respcache.Cache, error) {
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
	c, err := respcache.Open(respcache.Config{Path: cc.Path, TTL: cc.TTL, Nondeterministic: cc.Nondeterministic})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return c, nil
}

// cacheTallies counts the cached calls of each agent of a run: a
// agent.Scope that gives each agent a respcache.Tally, wrapping the
// Observer the run already had (the tracer's), if any.
type cacheTallies struct {
	next agent.Observer // nil: none
	mu   sync.Mutex
	by   map[int]*respcache.Tally // by input index, until the result is written
}

// newCacheTallies returns the tallies of a run whose context carried the
// Observer next (nil: none).
func newCacheTallies(next agent.Observer) *cacheTallies {
	return &cacheTallies{next: next, by: make(map[int]*respcache.Tally)}
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
// tally, and forgets the tally.
func (c *cacheTallies) fill(r *job.Result) {
	c.mu.Lock()
	t := c.by[r.Index]
	delete(c.by, r.Index)
	c.mu.Unlock()
	if t == nil {
		return
	}
	calls, saved := t.Counts()
	r.CachedCalls, r.SavedTokens = calls, saved.Total()
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
