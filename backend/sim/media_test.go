package sim_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// pngOf returns a w×h PNG.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCapabilitiesMedia(t *testing.T) {
	t.Parallel()
	m, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	caps := m.Capabilities()
	if !caps.InProcess || !caps.Streaming {
		t.Errorf("Capabilities() = %+v, want InProcess and Streaming", caps)
	}
	for _, p := range []llm.Part{
		{Kind: llm.PartImage, Data: []byte("x"), MediaType: "image/png"},
		{Kind: llm.PartImage, URL: "https://example.com/a.png"},
		{Kind: llm.PartAudio, Data: []byte("x"), MediaType: "audio/wav"},
		{Kind: llm.PartFile, Data: []byte("%PDF-"), MediaType: "application/pdf"},
		{Kind: llm.PartFile, FileID: "file-1"},
		{Kind: llm.PartFile, URL: "https://example.com/a.pdf"},
	} {
		if err := caps.Media.Accepts(p); err != nil {
			t.Errorf("Capabilities().Media.Accepts(%s %q%q) = %v, want nil", p.Kind, p.URL, p.FileID, err)
		}
	}
}

// TestMediaUsage checks that a request with media reports its text's
// tokens plus each part's as the chosen provider bills it, and answers
// the task its text parts hold.
func TestMediaUsage(t *testing.T) {
	t.Parallel()
	img := pngOf(t, 1024, 1024) // OpenAI: 765 tokens; Anthropic: 1,399
	task := "Describe the photo. sim_tool_turns=0"
	text := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: task}}}
	withMedia := func(p llm.Part) *llm.Request {
		return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: task}, p}}}}
	}
	textTokens := int64(sim.Tokens(len(task)))
	tests := []struct {
		name    string
		billing media.Billing
		req     *llm.Request
		want    int64
	}{
		{"text only", "", text, textTokens},
		{"image bytes openai", "", withMedia(llm.Part{Kind: llm.PartImage, Data: img, MediaType: "image/png"}), textTokens + 765},
		{"image bytes anthropic", media.BillingAnthropic, withMedia(llm.Part{Kind: llm.PartImage, Data: img, MediaType: "image/png"}), textTokens + 1399},
		{"image data url low", media.BillingOpenAI, withMedia(llm.Part{Kind: llm.PartImage, Detail: "low", URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)}), textTokens + 85},
		{"pdf pages", "", withMedia(llm.Part{Kind: llm.PartFile, FileID: "file-1", Pages: 3}), textTokens + 3*media.TokensPerPage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := sim.New(sim.Config{MediaTokens: tt.billing})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := m.Generate(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage.PromptTokens != tt.want {
				t.Errorf("Generate(%s).Usage.PromptTokens = %d, want %d", tt.name, resp.Usage.PromptTokens, tt.want)
			}
			billing := tt.billing
			if billing == "" {
				billing = media.DefaultBilling
			}
			if got := int64(sim.BilledPromptTokens(tt.req, billing)); got != tt.want {
				t.Errorf("BilledPromptTokens(%s, %s) = %d, want %d (the usage a dry run must match)", tt.name, billing, got, tt.want)
			}
			// The task is the text parts': the same answer as text alone.
			plain, err := m.Generate(t.Context(), text)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != plain.Message.Content || resp.Message.Content == "" {
				t.Errorf("answer with media = %q, want the text-only task's %q", resp.Message.Content, plain.Message.Content)
			}
		})
	}
}

func TestPromptTokensTextUnchanged(t *testing.T) {
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: "summarise the file please"}},
		Tools:    []llm.ToolDef{{Name: "read_file", Description: "reads", Parameters: []byte(`{"type":"object"}`)}},
	}
	if got, want := sim.PromptTokens(req), sim.Tokens(req.TextBytes()); got != want {
		t.Errorf("PromptTokens(text only) = %d, want %d", got, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { sim.PromptTokens(req) }); allocs != 0 {
		t.Errorf("PromptTokens(text only) allocates %v times, want 0", allocs)
	}
}
