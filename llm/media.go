package llm

import "fmt"

// PartKind says what a content [Part] holds.
type PartKind string

// The kinds of content part.
const (
	PartText  PartKind = "text"
	PartImage PartKind = "image" // a picture: URL (https or data:), or Data with MediaType
	PartAudio PartKind = "audio" // a recording: Data with MediaType (audio/wav, audio/mpeg)
	PartFile  PartKind = "file"  // a document: PDF Data, a URL, or a provider's FileID
)

// A Part is one piece of a message's content: text, or a media item the
// model reads (an image, audio, a document). A message holds parts only
// when it carries media (see [Message.Parts]); text-only messages keep
// their text in Content.
//
// Media is given one way: by URL (an https URL the provider fetches, or a
// data: URL), by Data (the bytes, with MediaType), or, for a file, by a
// provider's FileID. Backends map a part to their wire: OpenAI's
// image_url, input_audio and file parts, Anthropic's image and document
// blocks, Bedrock's image and document blocks; a part a backend cannot
// take is refused when the job opens ([Capabilities.Media]).
type Part struct {
	Kind PartKind `json:"kind"`
	// Text is a text part's text.
	Text string `json:"text,omitempty"`
	// URL locates the media: https://… (the provider fetches it) or a
	// data: URL holding it.
	URL string `json:"url,omitempty"`
	// Data is the media's bytes, of type MediaType.
	Data []byte `json:"data,omitempty"`
	// MediaType is the media's IANA type: image/png, image/jpeg,
	// image/gif, image/webp, audio/wav, audio/mpeg, application/pdf.
	MediaType string `json:"media_type,omitempty"`
	// Detail is an image's detail level where the provider has one
	// (OpenAI: "low", "high", "auto"); "" is the provider's default.
	Detail string `json:"detail,omitempty"`
	// FileID names a file already uploaded to the provider.
	FileID string `json:"file_id,omitempty"`
	// Filename names a document for providers that want one.
	Filename string `json:"filename,omitempty"`
	// Width and Height are an image's size in pixels, and Pages a
	// document's page count, when known: what providers bill media by,
	// for token estimates. Zero: unknown.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	Pages  int `json:"pages,omitempty"`
	// Ref is where the media came from (a path under a job's media roots,
	// or a URL) and Hash the SHA-256 of its bytes, hex: what a checkpoint
	// keeps instead of the bytes, to read them again on resume.
	Ref  string `json:"ref,omitempty"`
	Hash string `json:"hash,omitempty"`
}

// Media says which content parts a backend takes besides text.
type Media struct {
	Image    bool // images as bytes (or data: URLs)
	ImageURL bool // images by https URL, fetched by the provider
	Audio    bool // audio as bytes
	File     bool // documents (PDF) as bytes (or data: URLs)
	FileURL  bool // documents by https URL, fetched by the provider
	FileID   bool // documents by a provider's file id (uploaded beforehand)
	// Billing names the rule by which the provider bills media's prompt
	// tokens, for estimates where it does not report them: "openai"
	// (512-px tiles), "anthropic" (width×height/750). "" is OpenAI's.
	Billing string
}

// Accepts reports, with an error naming what is missing, whether a
// backend taking m can be sent p.
func (m Media) Accepts(p Part) error {
	byURL := p.URL != "" && !isDataURL(p.URL)
	ok := true
	switch p.Kind {
	case PartText:
	case PartImage:
		ok = (byURL && m.ImageURL) || (!byURL && m.Image)
	case PartAudio:
		ok = m.Audio && !byURL
	case PartFile:
		switch {
		case p.FileID != "":
			ok = m.FileID
		case byURL:
			ok = m.FileURL
		default:
			ok = m.File
		}
	default:
		return fmt.Errorf("unknown content part kind %q", p.Kind)
	}
	if ok {
		return nil
	}
	how := "as bytes"
	switch {
	case p.FileID != "":
		how = "by provider file id"
	case byURL:
		how = "by URL"
	}
	return fmt.Errorf("the backend takes no %s parts %s", p.Kind, how)
}

// isDataURL reports whether u is a data: URL.
func isDataURL(u string) bool { return len(u) >= 5 && (u[:5] == "data:" || u[:5] == "DATA:") }
