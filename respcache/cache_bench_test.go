package respcache_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/respcache"
)

// BenchmarkGenerateHit is a call answered from the file: key, read,
// decode.
func BenchmarkGenerateHit(b *testing.B) {
	c, err := respcache.Open(respcache.Config{Path: filepath.Join(b.TempDir(), "r.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := sim.New(sim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	m := c.Wrap(s)
	req := request("a task of a few words, as an agent's first call has")
	if _, err := m.Generate(b.Context(), req); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Generate(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerateMissStore is a call passed to the (instant) simulator
// and its answer stored: the cache's cost on a first run.
func BenchmarkGenerateMissStore(b *testing.B) {
	c, err := respcache.Open(respcache.Config{Path: filepath.Join(b.TempDir(), "r.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := sim.New(sim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	m := c.Wrap(s)
	i := 0
	for b.Loop() {
		i++
		if _, err := m.Generate(b.Context(), request(fmt.Sprint("task ", i))); err != nil {
			b.Fatal(err)
		}
	}
}
