package tool

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"time"
)

// Cache is a store of tool results shared with other processes (package
// queue's ToolCache keeps one in Redis), so that a cacheable tool called
// with the same arguments by agents on many workers runs once per TTL, not
// once per worker ([PoolConfig.Shared]).
//
// Keys are safe as they are for any store: a tool's name, a colon and 64
// hexadecimal digits. Values are opaque bytes the Pool encodes; the Cache
// stores them as given and must keep them no longer than ttl.
// Implementations must be safe for concurrent use.
type Cache interface {
	// Get returns the value stored under key; ok is false when there is
	// none (or it expired). An error means the store could not be read.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// Set stores value under key for ttl, replacing any value there.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

const (
	// sharedCacheTimeout bounds each Get and Set of the shared cache.
	sharedCacheTimeout = time.Second
	// sharedCacheBackoff is how long a pool leaves the shared cache alone
	// after it failed, so that an outage does not slow every call.
	sharedCacheBackoff = 5 * time.Second
)

// specDigest identifies a tool for the shared cache: its name,
// description and parameters, so that two different tools that happen to
// share a name do not share results.
func specDigest(s Spec) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(s.Name))
	h.Write([]byte{0})
	h.Write([]byte(s.Description))
	h.Write([]byte{0})
	h.Write(s.Parameters)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// sharedKey returns the shared cache's key of a call of e whose pool key
// (name, NUL, canonical arguments) is key.
func sharedKey(e *entry, key string) string {
	h := sha256.New()
	h.Write(e.digest[:])
	h.Write([]byte(key))
	return e.spec.Name + ":" + hex.EncodeToString(h.Sum(nil))
}

// encodeShared returns the shared cache's value of result, valid until
// expires: the expiry in Unix milliseconds (8 bytes, big-endian), then the
// result. A value carries its expiry so that a pool that finds it caches
// it locally no longer than it stays valid.
func encodeShared(result string, expires time.Time) []byte {
	v := make([]byte, 8, 8+len(result))
	binary.BigEndian.PutUint64(v, uint64(expires.UnixMilli()))
	return append(v, result...)
}

// decodeShared reverses encodeShared; ok is false for a value it did not
// make.
func decodeShared(v []byte) (result string, expires time.Time, ok bool) {
	if len(v) < 8 {
		return "", time.Time{}, false
	}
	return string(v[8:]), time.UnixMilli(int64(binary.BigEndian.Uint64(v))), true
}

// sharedGet looks key up in the shared cache; ok is false on a miss, an
// expired value and an error (which it reports to noteShared).
func (p *Pool) sharedGet(ctx context.Context, e *entry, key string) (result string, expires time.Time, ok bool) {
	if p.sharedResting() {
		return "", time.Time{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, sharedCacheTimeout)
	defer cancel()
	v, found, err := p.cfg.Shared.Get(ctx, sharedKey(e, key))
	p.noteShared(ctx, e, err)
	if err != nil || !found {
		return "", time.Time{}, false
	}
	result, expires, ok = decodeShared(v)
	if !ok || !time.Now().Before(expires) {
		return "", time.Time{}, false
	}
	return result, expires, true
}

// sharedSet stores result under key in the shared cache until expires.
func (p *Pool) sharedSet(ctx context.Context, e *entry, key, result string, expires time.Time) {
	ttl := time.Until(expires)
	if ttl <= 0 || p.sharedResting() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedCacheTimeout)
	defer cancel()
	p.noteShared(ctx, e, p.cfg.Shared.Set(ctx, sharedKey(e, key), encodeShared(result, expires), ttl))
}

// sharedResting reports whether the shared cache failed less than
// sharedCacheBackoff ago: calls then skip it.
func (p *Pool) sharedResting() bool {
	return time.Now().UnixNano() < p.sharedRestUntil.Load()
}

// noteShared notes the shared cache's answer: an error rests it for
// sharedCacheBackoff. It logs when the cache begins to fail (at Warn: the
// tools run without it meanwhile) and when it answers again (at Info),
// once each, not once per call. Errors of a call whose callers all left
// say nothing about the cache.
func (p *Pool) noteShared(ctx context.Context, e *entry, err error) {
	switch {
	case err != nil && ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded:
	case err != nil:
		p.sharedRestUntil.Store(time.Now().Add(sharedCacheBackoff).UnixNano())
		if p.sharedFailing.CompareAndSwap(false, true) {
			p.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "shared tool cache failing: tools run without it",
				slog.String("tool", e.spec.Name), slog.Any("err", err))
		}
	case p.sharedFailing.CompareAndSwap(true, false):
		p.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "shared tool cache answering again", slog.String("tool", e.spec.Name))
	}
}
