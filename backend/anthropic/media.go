package anthropic

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	imedia "github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// filesBeta is the beta the Messages API wants named on a request whose
// document refers to an uploaded file by its id.
const filesBeta = "files-api-2025-04-14"

// media is what the Messages API takes besides text: images and PDF
// documents, as bytes (base64) or by URL, documents also by file id. It
// takes no audio.
var media = llm.Media{Image: true, ImageURL: true, File: true, FileURL: true, FileID: true, Billing: string(imedia.BillingAnthropic)}

// imageTypes are the image media types the Messages API takes.
var imageTypes = map[string]sdk.Base64ImageSourceMediaType{
	"image/jpeg": sdk.Base64ImageSourceMediaTypeImageJPEG,
	"image/png":  sdk.Base64ImageSourceMediaTypeImagePNG,
	"image/gif":  sdk.Base64ImageSourceMediaTypeImageGIF,
	"image/webp": sdk.Base64ImageSourceMediaTypeImageWebP,
}

// partBlocks maps the parts of a user message to content blocks. Empty
// text parts are left out, as the API refuses them. The error names the
// part (by its index) that the API cannot take.
func partBlocks(parts []llm.Part) ([]sdk.ContentBlockParamUnion, bool, error) {
	blocks := make([]sdk.ContentBlockParamUnion, 0, len(parts))
	files := false
	for i, p := range parts {
		if p.Kind == llm.PartText {
			if p.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(p.Text))
			}
			continue
		}
		b, err := mediaBlock(p)
		if err != nil {
			return nil, false, fmt.Errorf("content part %d: %w", i, err)
		}
		files = files || p.FileID != ""
		blocks = append(blocks, b)
	}
	return blocks, files, nil
}

// mediaBlock maps one image or document part to its block.
func mediaBlock(p llm.Part) (sdk.ContentBlockParamUnion, error) {
	if err := media.Accepts(p); err != nil {
		return sdk.ContentBlockParamUnion{}, err
	}
	switch p.Kind {
	case llm.PartImage:
		img, err := imageBlock(p)
		if err != nil {
			return sdk.ContentBlockParamUnion{}, err
		}
		return sdk.ContentBlockParamUnion{OfImage: img}, nil
	default: // llm.PartFile: Accepts refused the rest
		doc, err := documentBlock(p)
		if err != nil {
			return sdk.ContentBlockParamUnion{}, err
		}
		return sdk.ContentBlockParamUnion{OfDocument: doc}, nil
	}
}

// imageBlock maps an image part: an https URL as a url source, bytes or a
// data: URL as a base64 one.
func imageBlock(p llm.Part) (*sdk.ImageBlockParam, error) {
	if p.URL != "" && !isDataURL(p.URL) {
		if err := checkHTTPS(p.URL); err != nil {
			return nil, fmt.Errorf("image: %w", err)
		}
		return &sdk.ImageBlockParam{Source: sdk.ImageBlockParamSourceUnion{OfURL: &sdk.URLImageSourceParam{URL: p.URL}}}, nil
	}
	typ, data, err := partData(p)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	mt, ok := imageTypes[typ]
	if !ok {
		return nil, fmt.Errorf("image: media type %q is not one the API takes (image/jpeg, image/png, image/gif, image/webp)", typ)
	}
	return &sdk.ImageBlockParam{Source: sdk.ImageBlockParamSourceUnion{OfBase64: &sdk.Base64ImageSourceParam{MediaType: mt, Data: data}}}, nil
}

// documentBlock maps a document part: a file id, an https URL, or PDF
// bytes (or a data: URL of them). Filename becomes the document's title.
func documentBlock(p llm.Part) (*sdk.DocumentBlockParam, error) {
	doc := &sdk.DocumentBlockParam{}
	switch {
	case p.FileID != "":
		doc.Source.OfFile = &sdk.FileDocumentSourceParam{FileID: p.FileID}
	case p.URL != "" && !isDataURL(p.URL):
		if err := checkHTTPS(p.URL); err != nil {
			return nil, fmt.Errorf("document: %w", err)
		}
		doc.Source.OfURL = &sdk.URLPDFSourceParam{URL: p.URL}
	default:
		typ, data, err := partData(p)
		if err != nil {
			return nil, fmt.Errorf("document: %w", err)
		}
		if typ != "application/pdf" {
			return nil, fmt.Errorf("document: media type %q is not one the API takes (application/pdf)", typ)
		}
		doc.Source.OfBase64 = &sdk.Base64PDFSourceParam{Data: data}
	}
	if p.Filename != "" {
		doc.Title = sdk.String(p.Filename)
	}
	return doc, nil
}

// partData returns a part's media type and its bytes in standard base64:
// from Data (with MediaType), or decoded from a data: URL.
func partData(p llm.Part) (mediaType, data string, err error) {
	if p.URL == "" {
		if len(p.Data) == 0 {
			return "", "", fmt.Errorf("no data, URL or file id")
		}
		if p.MediaType == "" {
			return "", "", fmt.Errorf("bytes without a media type")
		}
		return strings.ToLower(p.MediaType), base64.StdEncoding.EncodeToString(p.Data), nil
	}
	mediaType, raw, err := imedia.SplitDataURL(p.URL)
	if err != nil {
		return "", "", err
	}
	return mediaType, base64.StdEncoding.EncodeToString(raw), nil
}

// checkHTTPS refuses a URL the provider would not fetch.
func checkHTTPS(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("URL %q is not an https URL", raw)
	}
	return nil
}

// isDataURL reports whether u is a data: URL.
func isDataURL(u string) bool { return len(u) >= 5 && strings.EqualFold(u[:5], "data:") }

// toolResultContent maps a tool message's parts to tool_result content:
// text, images and documents, which the Messages API takes there.
func toolResultContent(parts []llm.Part) ([]sdk.ToolResultBlockParamContentUnion, bool, error) {
	blocks, files, err := partBlocks(parts)
	if err != nil {
		return nil, false, err
	}
	out := make([]sdk.ToolResultBlockParamContentUnion, 0, len(blocks))
	for _, b := range blocks {
		switch {
		case b.OfText != nil:
			out = append(out, sdk.ToolResultBlockParamContentUnion{OfText: b.OfText})
		case b.OfImage != nil:
			out = append(out, sdk.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
		case b.OfDocument != nil:
			out = append(out, sdk.ToolResultBlockParamContentUnion{OfDocument: b.OfDocument})
		}
	}
	return out, files, nil
}

// options returns opts, plus the option naming the Files API beta when the
// request refers to an uploaded file.
func (c *call) options(opts ...option.RequestOption) []option.RequestOption {
	if c.files {
		return append(opts, option.WithHeaderAdd("anthropic-beta", filesBeta))
	}
	return opts
}
