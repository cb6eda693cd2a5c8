package backendtest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"slices"

	"github.com/batchagent/batchagent/llm"
)

// The media scenarios: a user message whose parts carry media, or a tool
// result that does. Fixtures answer each as Plain (PlainText, PlainUsage,
// finish stop) and check that the request carries the media in the
// provider's wire form. Run skips a media scenario for a backend whose
// Capabilities().Media does not accept every part of its request.
const (
	// MediaImage: MediaText, then ImagePNG as bytes (image/png).
	MediaImage Scenario = "media_image"
	// MediaImageDataURL: MediaText, then ImagePNG as a base64 data: URL,
	// which a backend sends as bytes.
	MediaImageDataURL Scenario = "media_image_data_url"
	// MediaImageURL: MediaText, then the image at ImageURL, for the
	// provider to fetch.
	MediaImageURL Scenario = "media_image_url"
	// MediaFile: MediaText, then DocumentPDF as bytes (application/pdf)
	// named DocumentName.
	MediaFile Scenario = "media_file"
	// MediaAudio: MediaText, then AudioWAV as bytes (audio/wav).
	MediaAudio Scenario = "media_audio"
	// MediaToolImage: the ToolResult conversation whose tool result is
	// parts: ToolResultText, then ImagePNG as bytes.
	MediaToolImage Scenario = "media_tool_image"
)

// MediaScenarios lists the media scenarios in order. Run runs them after
// Scenarios.
var MediaScenarios = []Scenario{MediaImage, MediaImageDataURL, MediaImageURL, MediaFile, MediaAudio, MediaToolImage}

// The values of the media requests.
const (
	// MediaText is the text part before the media of a media request.
	MediaText = "Describe this."
	// ImageURL is the https URL of MediaImageURL's image.
	ImageURL = "https://media.example.com/photo.png"
	// DocumentName is the file name of MediaFile's document.
	DocumentName = "invoice 2026.pdf"
)

// ImagePNG is a 2×2 PNG image, DocumentPDF a one-page PDF and AudioWAV a
// short 8 kHz mono WAV recording: the media of the media scenarios.
var (
	ImagePNG    = pngImage()
	DocumentPDF = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n" +
		"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n" +
		"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>endobj\n" +
		"trailer<</Root 1 0 R>>\n%%EOF\n")
	AudioWAV = wavAudio()
)

// IsMedia reports whether s is one of MediaScenarios.
func IsMedia(s Scenario) bool { return slices.Contains(MediaScenarios, s) }

// mediaRequest returns the request of a media scenario, or nil.
func mediaRequest(s Scenario) *llm.Request {
	var media llm.Part
	switch s {
	case MediaImage:
		media = llm.Part{Kind: llm.PartImage, Data: ImagePNG, MediaType: "image/png", Width: 2, Height: 2}
	case MediaImageDataURL:
		media = llm.Part{Kind: llm.PartImage, URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(ImagePNG)}
	case MediaImageURL:
		media = llm.Part{Kind: llm.PartImage, URL: ImageURL}
	case MediaFile:
		media = llm.Part{Kind: llm.PartFile, Data: DocumentPDF, MediaType: "application/pdf", Filename: DocumentName, Pages: 1}
	case MediaAudio:
		media = llm.Part{Kind: llm.PartAudio, Data: AudioWAV, MediaType: "audio/wav"}
	case MediaToolImage:
		req := Request(ToolResult)
		tool := &req.Messages[len(req.Messages)-1]
		tool.Content = ""
		tool.Parts = []llm.Part{
			{Kind: llm.PartText, Text: ToolResultText},
			{Kind: llm.PartImage, Data: ImagePNG, MediaType: "image/png", Width: 2, Height: 2},
		}
		return req
	default:
		return nil
	}
	return &llm.Request{
		Model:     ModelName,
		MaxTokens: MaxTokens,
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: SystemText},
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: MediaText}, media}},
		},
	}
}

// mediaSkip returns why m skips media scenario s, or "" when its
// Capabilities().Media accepts every part of the scenario's request.
func mediaSkip(m llm.Model, s Scenario) string {
	var media llm.Media
	if c, ok := m.(llm.Capable); ok {
		media = c.Capabilities().Media
	}
	for _, msg := range mediaRequest(s).Messages {
		for _, p := range msg.Parts {
			if err := media.Accepts(p); err != nil {
				return "Capabilities().Media: " + err.Error()
			}
		}
	}
	return ""
}

// pngImage encodes a 2×2 image of four colours.
func pngImage() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.NRGBA{R: 255, A: 255})
	img.Set(1, 0, color.NRGBA{G: 255, A: 255})
	img.Set(0, 1, color.NRGBA{B: 255, A: 255})
	img.Set(1, 1, color.NRGBA{R: 255, G: 255, B: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("backendtest: encode PNG: " + err.Error()) // cannot happen: an in-memory image to a buffer
	}
	return buf.Bytes()
}

// wavAudio returns a WAV file of 16 silent 8-bit samples at 8 kHz, mono.
func wavAudio() []byte {
	const samples = 16
	var buf bytes.Buffer
	w := func(v any) { _ = binary.Write(&buf, binary.LittleEndian, v) }
	buf.WriteString("RIFF")
	w(uint32(36 + samples))
	buf.WriteString("WAVEfmt ")
	w(uint32(16))   // fmt chunk size
	w(uint16(1))    // PCM
	w(uint16(1))    // mono
	w(uint32(8000)) // sample rate
	w(uint32(8000)) // byte rate
	w(uint16(1))    // block align
	w(uint16(8))    // bits per sample
	buf.WriteString("data")
	w(uint32(samples))
	buf.Write(bytes.Repeat([]byte{128}, samples))
	return buf.Bytes()
}
