package simhttp

import (
	"container/list"
	"hash/fnv"
	"sync/atomic"

	"github.com/batchagent/batchagent/backend/sim"
)

// kvCache is the simulated GPU's KV cache, in blocks of blockTokens tokens,
// after vLLM's block manager with automatic prefix caching:
//
//   - a prompt's full blocks are identified by chained hashes of its
//     token prefix (blockHashes), so equal hashes mean equal prefixes;
//   - a running sequence holds (pins) the cached blocks of its prompt and
//     reserves room for the rest of its prompt and its completion, so its
//     blocks are never evicted;
//   - when a sequence finishes, its prompt's blocks stay cached, unpinned,
//     and are evicted least recently used first when a new sequence needs
//     room.
//
// It is owned by one goroutine (the server's Run loop); only evictions may
// be read from others.
type kvCache struct {
	capacity int                 // blocks in all
	blocks   map[uint64]*kvBlock // cached blocks, pinned or not
	lru      list.List           // of *kvBlock with refs == 0; front: most recently used
	reserved int                 // blocks reserved by running sequences, not (yet) cached ones

	// evicted holds the hashes evicted and not cached again since, to
	// count the prefill that recomputes them.
	evicted   map[uint64]struct{}
	evictions atomic.Int64 // blocks evicted; read by Server.Stats
}

// kvBlock is one cached block.
type kvBlock struct {
	hash uint64
	refs int           // running sequences that hold it
	elem *list.Element // in lru while refs == 0
}

func newKVCache(capacity int) *kvCache {
	return &kvCache{capacity: capacity, blocks: make(map[uint64]*kvBlock), evicted: make(map[uint64]struct{})}
}

// free returns the blocks neither cached nor reserved.
func (c *kvCache) free() int { return c.capacity - len(c.blocks) - c.reserved }

// pin holds the cached blocks of hashes from index from on, as long as
// they are cached in a row, and returns the index past the last one held:
// the number of leading blocks of hashes the caller now holds.
func (c *kvCache) pin(hashes []uint64, from int) int {
	n := from
	for ; n < len(hashes); n++ {
		b := c.blocks[hashes[n]]
		if b == nil {
			break
		}
		if b.refs == 0 {
			c.lru.Remove(b.elem)
			b.elem = nil
		}
		b.refs++
	}
	return n
}

// unpin releases the blocks hashes, held by pin or add. A block no
// sequence holds becomes evictable; the first block of a prefix is marked
// the most recently used, so a prefix is evicted from its end.
func (c *kvCache) unpin(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		b := c.blocks[hashes[i]]
		if b == nil {
			continue // cannot happen: held blocks are never evicted
		}
		if b.refs--; b.refs == 0 {
			b.elem = c.lru.PushFront(b)
		}
	}
}

// reserve makes room for n more blocks, evicting the least recently used
// unheld blocks, and reserves it. It reports false, reserving nothing,
// when the blocks held and reserved leave no room for n.
func (c *kvCache) reserve(n int) bool {
	for c.free() < n {
		e := c.lru.Back()
		if e == nil {
			return false
		}
		b := c.lru.Remove(e).(*kvBlock)
		delete(c.blocks, b.hash)
		c.evicted[b.hash] = struct{}{}
		c.evictions.Add(1)
	}
	c.reserved += n
	return true
}

// unreserve gives back n reserved blocks.
func (c *kvCache) unreserve(n int) { c.reserved -= n }

// add caches a block whose prefill is done, held by the sequence that
// computed it, using one of that sequence's reserved blocks. When another
// sequence cached the same block meanwhile, the caller holds that one and
// the reserved block is given back.
func (c *kvCache) add(hash uint64) {
	c.reserved--
	if b := c.blocks[hash]; b != nil {
		if b.refs == 0 {
			c.lru.Remove(b.elem)
			b.elem = nil
		}
		b.refs++
		return
	}
	c.blocks[hash] = &kvBlock{hash: hash, refs: 1}
	delete(c.evicted, hash)
}

// wasEvicted reports whether the block hash was cached once and evicted
// since.
func (c *kvCache) wasEvicted(hash uint64) bool {
	_, ok := c.evicted[hash]
	return ok
}

// blocksFor returns the blocks that tokens tokens take.
func blocksFor(tokens int) int { return (tokens + blockTokens - 1) / blockTokens }

// blockHashes returns the chained hashes of the full 16-token blocks of a
// rendered prompt: each is the FNV-1a hash of the whole prefix up to the
// block's end, so equal hashes mean equal prefixes.
func blockHashes(prompt []byte) []uint64 {
	const blockBytes = blockTokens * sim.BytesPerToken
	hashes := make([]uint64, 0, len(prompt)/blockBytes)
	h := fnv.New64a()
	for end := blockBytes; end <= len(prompt); end += blockBytes {
		h.Write(prompt[end-blockBytes : end])
		hashes = append(hashes, h.Sum64()) // Sum64 does not reset h: the hash chains
	}
	return hashes
}
