package queue

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batchagent/batchagent/respcache"
)

// ResponseStore is a respcache.Store in Redis, shared by every worker: a
// model call answered on one machine is answered from it on all. Each
// entry is a plain Redis string under prefix + key (the key is the
// request's hash: it holds no prompt, no credential), expiring after the
// cache's TTL when one is set (SET PX). The value is the entry's created
// time (8 bytes, Unix nanoseconds, big-endian), its SHA-256 (32 bytes)
// and the answer's JSON. It is safe for concurrent use.
type ResponseStore struct {
	rdb    redis.UniversalClient
	prefix string
}

// responseHeader is the length of a value's created time and sum.
const responseHeader = 8 + sha256.Size

// NewResponseStore returns a store of model answers in rdb under keys
// that start with prefix: Client.Key("resp") + ":", shared by every run
// on the Redis, since a key names a request, not a run. Its Close leaves
// rdb open: rdb is the caller's.
func NewResponseStore(rdb redis.UniversalClient, prefix string) *ResponseStore {
	return &ResponseStore{rdb: rdb, prefix: prefix}
}

// Get returns the entry under key; ok is false when there is none. A
// value too short to be an entry is an error that names the key.
func (s *ResponseStore) Get(ctx context.Context, key string) (respcache.Entry, bool, error) {
	v, err := s.rdb.Get(ctx, s.prefix+key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return respcache.Entry{}, false, nil
	case err != nil:
		return respcache.Entry{}, false, fmt.Errorf("queue: response cache get %s: %w", s.prefix+key, err)
	case len(v) < responseHeader:
		return respcache.Entry{}, false, fmt.Errorf("queue: response cache get %s: damaged entry of %d bytes", s.prefix+key, len(v))
	}
	return respcache.Entry{
		Created:  time.Unix(0, int64(binary.BigEndian.Uint64(v[:8]))),
		Sum:      v[8:responseHeader],
		Response: v[responseHeader:],
	}, true, nil
}

// Put stores e under key, for ttl when ttl is above zero (rounded up to
// Redis's millisecond).
func (s *ResponseStore) Put(ctx context.Context, key string, e respcache.Entry, ttl time.Duration) error {
	if len(e.Sum) != sha256.Size {
		return fmt.Errorf("queue: response cache set %s: sum of %d bytes, want %d", s.prefix+key, len(e.Sum), sha256.Size)
	}
	v := make([]byte, 0, responseHeader+len(e.Response))
	v = binary.BigEndian.AppendUint64(v, uint64(e.Created.UnixNano()))
	v = append(v, e.Sum...)
	v = append(v, e.Response...)
	if ttl > 0 && ttl < time.Millisecond {
		ttl = time.Millisecond
	}
	if err := s.rdb.Set(ctx, s.prefix+key, v, ttl).Err(); err != nil {
		return fmt.Errorf("queue: response cache set %s: %w", s.prefix+key, err)
	}
	return nil
}

// Close does nothing: the Redis client is the caller's.
func (s *ResponseStore) Close() error { return nil }
