package media_test

import (
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

func TestOpenAIImageTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		w, h   int
		detail string
		want   int
	}{
		{1024, 1024, "high", 765},  // → 768×768: 4 tiles (OpenAI's worked example)
		{2048, 4096, "high", 1105}, // → 1024×2048 → 768×1536: 6 tiles (OpenAI's example)
		{4096, 8192, "low", 85},    // low is flat
		{100, 100, "", 255},        // one tile, never scaled up
		{512, 512, "auto", 255},
		{513, 512, "auto", 425},
	}
	for _, tt := range tests {
		if got := media.OpenAIImageTokens(tt.w, tt.h, tt.detail); got != tt.want {
			t.Errorf("OpenAIImageTokens(%d, %d, %q) = %d, want %d", tt.w, tt.h, tt.detail, got, tt.want)
		}
	}
}

func TestAnthropicImageTokens(t *testing.T) {
	t.Parallel()
	tests := []struct{ w, h, want int }{
		{200, 200, 54},     // Anthropic's table: ~54
		{1000, 1000, 1334}, // ~1,334
		{1092, 1092, 1590}, // ~1,590
		{3136, 1000, 1046}, // long edge scaled to 1568 → 1568×500
		{8000, 8000, 1600}, // capped
		{1, 1, 1},
	}
	for _, tt := range tests {
		if got := media.AnthropicImageTokens(tt.w, tt.h); got != tt.want {
			t.Errorf("AnthropicImageTokens(%d, %d) = %d, want %d", tt.w, tt.h, got, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	png := pngBytes(t, 1024, 1024)
	wav := wavBytes(3 * time.Second)
	tests := []struct {
		name string
		part llm.Part
		b    media.Billing
		want int
	}{
		{"text", llm.Part{Kind: llm.PartText, Text: "hello"}, media.BillingOpenAI, 0},
		{"image bytes openai", llm.Part{Kind: llm.PartImage, Data: png, MediaType: "image/png"}, media.BillingOpenAI, 765},
		{"image bytes anthropic", llm.Part{Kind: llm.PartImage, Data: png, MediaType: "image/png"}, media.BillingAnthropic, 1399},
		{"image data url", llm.Part{Kind: llm.PartImage, URL: dataURL("image/png", pngBytes(t, 100, 100))}, media.BillingOpenAI, 255},
		{"image low", llm.Part{Kind: llm.PartImage, Data: png, Detail: "low"}, media.BillingOpenAI, 85},
		{"image sized", llm.Part{Kind: llm.PartImage, URL: "https://x/a.png", Width: 200, Height: 200}, media.BillingAnthropic, 54},
		{"image by url", llm.Part{Kind: llm.PartImage, URL: "https://x/a.png"}, media.BillingOpenAI, 765},
		{"pdf", llm.Part{Kind: llm.PartFile, Data: pdfBytes(4)}, media.BillingOpenAI, 6000},
		{"pdf pages set", llm.Part{Kind: llm.PartFile, FileID: "file-1", Pages: 2}, media.BillingAnthropic, 3000},
		{"file id", llm.Part{Kind: llm.PartFile, FileID: "file-1"}, media.BillingOpenAI, 1500},
		{"wav", llm.Part{Kind: llm.PartAudio, Data: wav}, media.BillingOpenAI, 30},
		{"wav data url", llm.Part{Kind: llm.PartAudio, URL: dataURL("audio/wav", wav)}, media.BillingOpenAI, 30},
		{"mp3 by size", llm.Part{Kind: llm.PartAudio, Data: append([]byte("ID3"), make([]byte, 32000)...)}, media.BillingOpenAI, 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := media.Tokens(&tt.part, tt.b); got != tt.want {
				t.Errorf("Tokens(%s, %s) = %d, want %d", tt.name, tt.b, got, tt.want)
			}
		})
	}
}

func TestParseBilling(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]media.Billing{"": media.BillingOpenAI, "openai": media.BillingOpenAI, "anthropic": media.BillingAnthropic} {
		if got, err := media.ParseBilling(in); err != nil || got != want {
			t.Errorf("ParseBilling(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := media.ParseBilling("gemini"); err == nil {
		t.Error("ParseBilling(gemini) = nil error, want one")
	}
}
