package simhttp

import (
	"fmt"
	"strings"
	"time"
)

// The named server profiles of [Profile]: the three kinds of server on
// which packing prompts pays off differently.
const (
	// ProfileCachedSlots is a slot-bound continuous-batching server with a
	// prefix cache (vLLM-like): DefaultMaxSeqs sequences and the
	// calibrated defaults, the zero Config. The cache already spares the
	// shared prompt and separate calls decode side by side, so packing
	// saves calls but not time.
	ProfileCachedSlots = "cached-slots"
	// ProfileOneSlot is a local server with one sequence, no prefix cache
	// and OneSlotCallOverhead per call (a game's Ollama): every call pays
	// the overhead and the whole prompt, one after the other, so packing
	// pays both once for many tasks.
	ProfileOneSlot = "one-slot"
	// ProfileRPMLimited is a hosted API that enforces RateLimitedRPM
	// requests and RateLimitedTPM tokens a minute with OpenAI's
	// x-ratelimit-* headers, on a wide (RateLimitedMaxSeqs) server: calls
	// are the bottleneck, so packing k tasks a call goes up to k times as
	// fast while tokens stay under their limit.
	ProfileRPMLimited = "rpm-limited"
)

// Limits of the named profiles.
const (
	// OneSlotCallOverhead is ProfileOneSlot's Config.CallOverhead.
	OneSlotCallOverhead = 150 * time.Millisecond
	// OneSlotMaxQueue is ProfileOneSlot's queue: Ollama's default
	// OLLAMA_MAX_QUEUE.
	OneSlotMaxQueue = 512
	// RateLimitedRPM and RateLimitedTPM are ProfileRPMLimited's limits:
	// requests bind long before tokens (an unpacked classification call
	// is about 300 tokens, so 600 of them a minute use 180,000 of the
	// 2,000,000 tokens).
	RateLimitedRPM = 600
	RateLimitedTPM = 2_000_000
	// RateLimitedMaxSeqs is ProfileRPMLimited's running batch: a hosted
	// API's capacity is wide, its account's limits are what bind.
	RateLimitedMaxSeqs = 256
)

// Profiles lists the names [Profile] knows, in a stable order.
var Profiles = []string{ProfileCachedSlots, ProfileOneSlot, ProfileRPMLimited}

// Profile returns the Config of a named server profile (see
// ProfileCachedSlots, ProfileOneSlot and ProfileRPMLimited), to adjust
// further (Model, faults, a key) before New. An unknown name is an error
// that lists the known ones.
func Profile(name string) (Config, error) {
	switch name {
	case ProfileCachedSlots:
		return Config{MaxSeqs: DefaultMaxSeqs}, nil
	case ProfileOneSlot:
		return Config{MaxSeqs: 1, MaxQueue: OneSlotMaxQueue, NoPrefixCache: true, CallOverhead: OneSlotCallOverhead}, nil
	case ProfileRPMLimited:
		return Config{MaxSeqs: RateLimitedMaxSeqs, MaxQueue: -1, RPM: RateLimitedRPM, TPM: RateLimitedTPM}, nil
	}
	return Config{}, fmt.Errorf("simhttp: unknown profile %q (known: %s)", name, strings.Join(Profiles, ", "))
}
