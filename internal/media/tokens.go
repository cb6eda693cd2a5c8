package media

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// Billing is a provider's rule for counting media's prompt tokens.
type Billing string

// The billing rules [Tokens] knows.
const (
	// BillingOpenAI counts images in 512-px tiles (OpenAI's vision
	// pricing, https://platform.openai.com/docs/guides/images-vision,
	// "Calculating costs"): detail "low" is a flat 85 tokens; "high",
	// "auto" and "" scale the image to fit 2048×2048, then so that its
	// shortest side is at most 768 px, and count 170 tokens a 512-px tile
	// plus 85.
	BillingOpenAI Billing = "openai"
	// BillingAnthropic counts images as width×height/750 after scaling
	// them to fit 1568 px on the long edge, at most about 1,600 tokens
	// (https://docs.anthropic.com/en/docs/build-with-claude/vision,
	// "Calculate image costs").
	BillingAnthropic Billing = "anthropic"
)

// DefaultBilling is the billing rule used where none is chosen.
const DefaultBilling = BillingOpenAI

// ParseBilling returns the Billing named s; "" is DefaultBilling.
func ParseBilling(s string) (Billing, error) {
	switch Billing(s) {
	case "":
		return DefaultBilling, nil
	case BillingOpenAI, BillingAnthropic:
		return Billing(s), nil
	}
	return "", fmt.Errorf("media: unknown billing %q (known: openai, anthropic)", s)
}

// Costs of media whose size is not known and of documents and audio.
const (
	// UnknownImageSide is the side, in pixels, of the square an image of
	// unknown size (one given by https URL) is counted as: 1024×1024, 765
	// tokens under OpenAI's rule and 1,398 under Anthropic's.
	UnknownImageSide = 1024
	// TokensPerPage is a PDF page's cost. Anthropic's PDF support page
	// (https://docs.anthropic.com/en/docs/build-with-claude/pdf-support,
	// "Estimate your costs") puts a page's text at 1,500–3,000 tokens,
	// and each page is also given as an image; OpenAI's file inputs
	// likewise send each page's text and image. The low end is taken for
	// both.
	TokensPerPage = 1500
	// TokensPerAudioSecond is audio's cost: OpenAI bills audio input at
	// one token per 100 ms (10 a second; Realtime and gpt-4o-audio
	// pricing, "Audio tokens").
	TokensPerAudioSecond = 10
	// AudioBytesPerSecond is the byte rate audio of unknown duration (not
	// WAV: MP3 and others) is counted at: 128 kbit/s, MP3's common rate.
	AudioBytesPerSecond = 16_000
)

// Tokens is the prompt tokens part p costs under billing rule b: 0 for a
// text part (its text is counted as text), an image's by its size, a
// document's by its pages, audio's by its duration. Sizes, pages and
// durations come from p.Width, p.Height and p.Pages where set, else from
// p.Data or a data: URL by [Sniff]; what cannot be known counts as
// documented on the constants above (an image as UnknownImageSide square,
// a document as one page). An unknown b counts as DefaultBilling.
// Tokens never fails: a part whose bytes do not sniff is counted as of
// unknown size.
func Tokens(p *llm.Part, b Billing) int {
	switch p.Kind {
	case llm.PartImage:
		w, h := p.Width, p.Height
		if w <= 0 || h <= 0 {
			info := sniffPart(p)
			w, h = info.Width, info.Height
		}
		if w <= 0 || h <= 0 {
			w, h = UnknownImageSide, UnknownImageSide
		}
		if b == BillingAnthropic {
			return AnthropicImageTokens(w, h)
		}
		return OpenAIImageTokens(w, h, p.Detail)
	case llm.PartFile:
		pages := p.Pages
		if pages <= 0 {
			pages = sniffPart(p).Pages
		}
		return max(1, pages) * TokensPerPage
	case llm.PartAudio:
		return AudioTokens(p)
	}
	return 0
}

// sniffPart sniffs p's bytes: Data, or a data: URL's payload.
func sniffPart(p *llm.Part) Info {
	if len(p.Data) > 0 {
		info, _ := Sniff(p.Data)
		return info
	}
	if len(p.URL) > 5 && strings.EqualFold(p.URL[:5], "data:") {
		head, payload, _ := strings.Cut(p.URL[5:], ",")
		if Canonical(head) != TypePDF && len(payload) > sniffPrefix {
			payload = payload[:sniffPrefix] // headers only: no need to decode it all
		}
		if data, err := decodeBase64(payload); err == nil {
			info, _ := Sniff(data)
			return info
		}
	}
	return Info{}
}

// sniffPrefix is how much of a data: URL's base64 payload sniffPart
// decodes for a type other than PDF: its headers lie well within it.
const sniffPrefix = 256 << 10

// OpenAIImageTokens is an image's cost under [BillingOpenAI] at detail
// ("low", "high", "auto" or "").
func OpenAIImageTokens(w, h int, detail string) int {
	if detail == "low" {
		return 85
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / math.Min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := math.Ceil(fw/512) * math.Ceil(fh/512)
	return int(tiles)*170 + 85
}

// anthropicMaxImageTokens is the cost above which Anthropic scales an
// image down further.
const anthropicMaxImageTokens = 1600

// AnthropicImageTokens is an image's cost under [BillingAnthropic].
func AnthropicImageTokens(w, h int) int {
	fw, fh := float64(w), float64(h)
	if s := 1568 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return min(anthropicMaxImageTokens, max(1, int(math.Ceil(fw*fh/750))))
}

// AudioTokens is an audio part's cost: TokensPerAudioSecond a second of
// its duration, read from a WAV header, or else estimated from its size
// at AudioBytesPerSecond; at least 1.
func AudioTokens(p *llm.Part) int {
	info := sniffPart(p)
	d := info.Duration
	if d <= 0 {
		n := len(p.Data)
		if n == 0 && len(p.URL) > 0 {
			n = len(p.URL) * 3 / 4 // a data: URL's payload, roughly
		}
		d = time.Duration(float64(n) / AudioBytesPerSecond * float64(time.Second))
	}
	return max(1, int(math.Ceil(d.Seconds()*TokensPerAudioSecond)))
}
