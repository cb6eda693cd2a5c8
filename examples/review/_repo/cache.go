package cache

import "sync"

// Cache is a tiny map cache. It has no eviction: it grows without bound.
type Cache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *Cache) Get(k string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *Cache) Put(k string, v []byte) {
	// BUG: c.m is never initialised, so Put panics on a zero Cache.
	c.mu.Lock()
	c.m[k] = v
	c.mu.Unlock()
}
