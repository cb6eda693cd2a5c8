package respcache

import (
	"context"
	"time"
)

// A Store holds a [Cache]'s entries: the SQLite file of [Open], or a store
// that several machines share (queue.ResponseStore, in Redis). The Cache
// checks what a Store returns (the sum, the age, the answer's
// completeness), so a Store keeps bytes and need not judge them.
// Implementations must be safe for concurrent use.
type Store interface {
	// Get returns the entry stored under key; ok is false when there is
	// none. An error (the store unreachable, an entry it cannot read) is
	// a miss to the Cache, counted in Stats.Errors.
	Get(ctx context.Context, key string) (e Entry, ok bool, err error)
	// Put stores e under key, replacing any entry there. ttl, when above
	// zero, is how long the store needs to keep it; zero means forever.
	Put(ctx context.Context, key string, e Entry, ttl time.Duration) error
	// Close releases the store.
	Close() error
}

// An Entry is one stored answer.
type Entry struct {
	// Response is the answer, an llm.Response as JSON.
	Response []byte
	// Sum is the SHA-256 of Response: an entry whose sum differs is
	// damaged, and a miss.
	Sum []byte
	// Created is when the answer was stored.
	Created time.Time
}
