package respcache

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
)

func TestStoreKeepsOnlyCompleteAnswers(t *testing.T) {
	t.Parallel()
	c, err := Open(Config{Path: filepath.Join(t.TempDir(), "r.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	for _, f := range []llm.FinishReason{llm.FinishLength, "content_filter", ""} {
		c.store(ctx, string(f)+"k", &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "cut"}, FinishReason: f})
		if r := c.lookup(ctx, string(f)+"k"); r != nil {
			t.Errorf("an answer with finish %q was stored", f)
		}
	}
	c.store(ctx, "ok", &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "fine"}, FinishReason: llm.FinishStop})
	if r := c.lookup(ctx, "ok"); r == nil || r.Message.Content != "fine" {
		t.Errorf("lookup = %+v, want the stored answer", r)
	}
	// A damaged entry is a miss, not a wrong answer.
	if _, err := c.entries.(*file).db.Exec(`UPDATE responses SET response = ? WHERE key = 'ok'`, []byte(`{"message":{"role":"assistant","content":"wrong"},"finish_reason":"stop"}`)); err != nil {
		t.Fatal(err)
	}
	if r := c.lookup(ctx, "ok"); r != nil {
		t.Errorf("a damaged entry answered %+v", r)
	}
	if c.Stats().Errors != 1 {
		t.Errorf("errors = %d, want 1 (the damaged entry)", c.Stats().Errors)
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	c, err := Open(Config{Path: filepath.Join(t.TempDir(), "r.db"), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	c.store(ctx, "k", &llm.Response{FinishReason: llm.FinishStop})
	if c.lookup(ctx, "k") == nil {
		t.Fatal("fresh entry missed")
	}
	old := time.Now().Add(-2 * time.Hour).UnixNano()
	if _, err := c.entries.(*file).db.Exec(`UPDATE responses SET created = ?`, old); err != nil {
		t.Fatal(err)
	}
	if c.lookup(ctx, "k") != nil {
		t.Error("an entry older than the TTL answered")
	}
}
