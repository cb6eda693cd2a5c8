package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// photo is a MediaTool that waits for release, counts its executions and
// returns a text and one image part of size bytes.
type photo struct {
	release chan struct{}
	size    int
	calls   atomic.Int64
}

func (p *photo) Spec() tool.Spec { return tool.Spec{Name: "photo", Cacheable: true} }

func (p *photo) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return "", errors.New("Call: want CallMedia")
}

func (p *photo) CallMedia(ctx context.Context, args json.RawMessage) (string, []llm.Part, error) {
	p.calls.Add(1)
	select {
	case <-p.release:
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
	return "a photo", []llm.Part{{Kind: llm.PartImage, MediaType: "image/png", Data: make([]byte, p.size)}}, nil
}

// TestPoolMediaCoalescedAndCached: identical calls of a media tool run
// once, and every caller, and a later cache hit, gets the text and the
// media; Call returns the text alone.
func TestPoolMediaCoalescedAndCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ph := &photo{release: make(chan struct{}), size: 10}
		p := newPool(t, tool.PoolConfig{}, ph)
		type got struct {
			text  string
			media []llm.Part
			err   error
		}
		res := make([]got, 2)
		var wg sync.WaitGroup
		for i := range res {
			wg.Go(func() {
				text, media, err := p.CallMedia(t.Context(), "photo", json.RawMessage(`{"p":"cat.png"}`))
				res[i] = got{text, media, err}
			})
		}
		synctest.Wait()
		close(ph.release)
		wg.Wait()
		for i, r := range res {
			if r.err != nil || r.text != "a photo" || len(r.media) != 1 || len(r.media[0].Data) != 10 || r.media[0].MediaType != "image/png" {
				t.Errorf("caller %d: CallMedia = %q, %v, %v; want \"a photo\", one 10-byte image/png part, nil", i, r.text, r.media, r.err)
			}
		}
		text, media, err := p.CallMedia(t.Context(), "photo", json.RawMessage(`{ "p" : "cat.png" }`))
		if err != nil || text != "a photo" || len(media) != 1 {
			t.Errorf("CallMedia (cached) = %q, %v, %v; want \"a photo\", one part, nil", text, media, err)
		}
		if text, err := p.Call(t.Context(), "photo", json.RawMessage(`{"p":"cat.png"}`)); err != nil || text != "a photo" {
			t.Errorf("Call = %q, %v; want \"a photo\", nil", text, err)
		}
		if n := ph.calls.Load(); n != 1 {
			t.Errorf("tool executed %d times, want 1", n)
		}
		want := []tool.Stats{{Name: "photo", Requested: 4, Executed: 1, Coalesced: 1, CacheHits: 2}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestPoolMediaCap: media over MaxMediaBytes fail the call with an error
// naming the size and the cap, while a long text is cut as before.
func TestPoolMediaCap(t *testing.T) {
	ph := &photo{release: make(chan struct{}), size: 2000}
	close(ph.release)
	p := newPool(t, tool.PoolConfig{MaxMediaBytes: 1000}, ph)
	_, media, err := p.CallMedia(t.Context(), "photo", json.RawMessage(`{}`))
	if err == nil || media != nil {
		t.Fatalf("CallMedia = %v, %v; want nil media and an error", media, err)
	}
	if want := "tool photo: its media are 2000 bytes, over the limit of 1000 bytes (MaxMediaBytes)"; err.Error() != want {
		t.Errorf("CallMedia error = %q, want %q", err, want)
	}
	var ce *tool.CallError
	if !errors.As(err, &ce) {
		t.Errorf("CallMedia error %T is not a *tool.CallError", err)
	}
	unlimited := newPool(t, tool.PoolConfig{MaxMediaBytes: -1}, ph)
	if _, media, err := unlimited.CallMedia(t.Context(), "photo", json.RawMessage(`{}`)); err != nil || len(media) != 1 {
		t.Errorf("CallMedia without a cap = %v, %v; want one part, nil", media, err)
	}
}

// TestPoolMediaPlainTool: a plain tool's CallMedia has no media.
func TestPoolMediaPlainTool(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{}, echo("e", false, &calls))
	text, media, err := p.CallMedia(t.Context(), "e", json.RawMessage(`{"a":1}`))
	if err != nil || media != nil || !strings.HasPrefix(text, "e{") {
		t.Errorf("CallMedia = %q, %v, %v; want e{...}, nil, nil", text, media, err)
	}
}

// TestPoolMediaNotShared: a media result stays out of the shared cache, so
// a second pool runs the tool itself and gets the media, not a text
// without them.
func TestPoolMediaNotShared(t *testing.T) {
	shared := &memCache{}
	ph := &photo{release: make(chan struct{}), size: 10}
	close(ph.release)
	for i := range 2 {
		p := newPool(t, tool.PoolConfig{Shared: shared}, ph)
		if _, media, err := p.CallMedia(t.Context(), "photo", json.RawMessage(`{}`)); err != nil || len(media) != 1 {
			t.Errorf("pool %d: CallMedia = %v, %v; want one part, nil", i, media, err)
		}
	}
	if n := ph.calls.Load(); n != 2 {
		t.Errorf("tool executed %d times, want 2 (once per pool)", n)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if len(shared.m) != 0 {
		t.Errorf("shared cache holds %d values, want none", len(shared.m))
	}
}
