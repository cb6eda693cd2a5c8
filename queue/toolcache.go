package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ToolCache is a cache of tool results in Redis, shared by every worker:
// set it as tool.PoolConfig.Shared (it implements tool.Cache), and a
// cacheable tool called with the same arguments on any worker runs once
// per TTL. Values are plain Redis strings under prefix + key, expiring
// after the TTL they were set with (SET PX). It is safe for concurrent
// use.
type ToolCache struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewToolCache returns a cache of tool results in rdb under keys that
// start with prefix (for example Client.Key("tool") + ":").
func NewToolCache(rdb redis.UniversalClient, prefix string) *ToolCache {
	return &ToolCache{rdb: rdb, prefix: prefix}
}

// Get returns the value under key; ok is false when there is none or it
// expired. The error, on a Redis failure, names the key.
func (c *ToolCache) Get(ctx context.Context, key string) (value []byte, ok bool, err error) {
	v, err := c.rdb.Get(ctx, c.prefix+key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("queue: tool cache get %s: %w", c.prefix+key, err)
	}
	return v, true, nil
}

// Set stores value under key for ttl, which must be at least a
// millisecond (Redis's precision). The error, on a Redis failure, names
// the key.
func (c *ToolCache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("queue: tool cache set %s: ttl %v under a millisecond", c.prefix+key, ttl)
	}
	if err := c.rdb.Set(ctx, c.prefix+key, value, ttl).Err(); err != nil {
		return fmt.Errorf("queue: tool cache set %s: %w", c.prefix+key, err)
	}
	return nil
}
