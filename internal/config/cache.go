package config

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// CacheConfig is the job file's cache key: where the answers of earlier
// model calls are kept, so that a call asked again is not paid again
// (package respcache).
type CacheConfig struct {
	// Off turns the cache off: the file's `cache: off`.
	Off bool
	// Path is the absolute path of the cache file (relative ones in the
	// file are resolved against the job file's directory). Empty means
	// the user's: respcache.DefaultPath.
	Path string
	// TTL is how long an answer stays valid. Zero means forever.
	TTL time.Duration
	// Nondeterministic caches the answers of calls sampled at a
	// temperature above zero without a seed too.
	Nondeterministic bool
}

func (c *CacheConfig) keys() keys {
	return keys{
		{"path", &c.Path},
		{"ttl", &c.TTL},
		{"nondeterministic", &c.Nondeterministic},
	}
}

// cacheField is the cache key: off, or a mapping of CacheConfig's keys
// (an empty one, {}, turns the cache on with its defaults).
type cacheField struct{ c **CacheConfig }

func (f cacheField) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == offWord {
		*f.c = &CacheConfig{Off: true}
		return
	}
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "expected %s or a mapping of path, ttl and nondeterministic, got %s", offWord, describe(n))
		return
	}
	c := new(CacheConfig)
	d.table(n, path, c.keys())
	if c.Path != "" {
		c.Path = d.resolve(c.Path)
	}
	if c.TTL < 0 {
		d.problem(d.at(path+".ttl"), path+".ttl", "must not be negative, got %v", c.TTL)
	}
	*f.c = c
}

func (f cacheField) encode() (any, error) {
	c := *f.c
	switch {
	case c == nil:
		return nil, nil
	case c.Off:
		return offWord, nil
	}
	n, err := encodeTable(c.keys())
	if n == nil && err == nil {
		n = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	}
	return n, err
}
