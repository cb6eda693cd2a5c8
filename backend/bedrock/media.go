package bedrock

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	imedia "github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// media is what Converse takes besides text: images and documents as
// bytes. It takes nothing by URL (its S3 locations aside) and no audio.
var media = llm.Media{Image: true, File: true, Billing: string(imedia.BillingAnthropic)} // Claude on Bedrock bills as Anthropic does

// imageFormats are the image media types Converse takes, by format.
var imageFormats = map[string]types.ImageFormat{
	"image/png":  types.ImageFormatPng,
	"image/jpeg": types.ImageFormatJpeg,
	"image/gif":  types.ImageFormatGif,
	"image/webp": types.ImageFormatWebp,
}

// documentFormats are the document media types Converse takes, by format.
var documentFormats = map[string]types.DocumentFormat{
	"application/pdf":    types.DocumentFormatPdf,
	"text/csv":           types.DocumentFormatCsv,
	"text/html":          types.DocumentFormatHtml,
	"text/plain":         types.DocumentFormatTxt,
	"text/markdown":      types.DocumentFormatMd,
	"application/msword": types.DocumentFormatDoc,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": types.DocumentFormatDocx,
	"application/vnd.ms-excel": types.DocumentFormatXls,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": types.DocumentFormatXlsx,
}

// maxDocumentName is the longest document name Converse accepts.
const maxDocumentName = 200

// docNames holds the document names of one request: Converse wants each
// document named, and the names apart. The zero value is ready; its map
// is made with the first document, so text-only requests make none.
type docNames struct {
	seen map[string]bool
}

// unique returns name, or name with " (2)", " (3)"... when already taken,
// and takes it.
func (d *docNames) unique(name string) string {
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	got := name
	for i := 2; d.seen[got]; i++ {
		suffix := " (" + strconv.Itoa(i) + ")"
		got = name[:min(len(name), maxDocumentName-len(suffix))] + suffix
	}
	d.seen[got] = true
	return got
}

// mediaBlock maps an image or document part to its content block. The
// error says why Converse cannot take the part.
func mediaBlock(p llm.Part, names *docNames) (types.ContentBlock, error) {
	if err := media.Accepts(p); err != nil {
		return nil, err
	}
	typ, data, err := partData(p)
	if err != nil {
		what := "image"
		if p.Kind == llm.PartFile {
			what = "document"
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if p.Kind == llm.PartImage {
		format, ok := imageFormats[typ]
		if !ok {
			return nil, fmt.Errorf("image: media type %q is not one Converse takes (image/png, image/jpeg, image/gif, image/webp)", typ)
		}
		return &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: format, Source: &types.ImageSourceMemberBytes{Value: data}}}, nil
	}
	format, ok := documentFormats[typ]
	if !ok {
		return nil, fmt.Errorf("document: media type %q is not one Converse takes (application/pdf, text/csv, text/html, text/plain, text/markdown, Word, Excel)", typ)
	}
	return &types.ContentBlockMemberDocument{Value: types.DocumentBlock{
		Format: format,
		Name:   aws.String(names.unique(documentName(p.Filename))),
		Source: &types.DocumentSourceMemberBytes{Value: data},
	}}, nil
}

// partBlocks maps a message's parts to content blocks, blank text left
// out. The error names the part (by index) Converse cannot take.
func partBlocks(parts []llm.Part, names *docNames) ([]types.ContentBlock, error) {
	blocks := make([]types.ContentBlock, 0, len(parts))
	for i, p := range parts {
		if p.Kind == llm.PartText {
			if strings.TrimSpace(p.Text) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: p.Text})
			}
			continue
		}
		b, err := mediaBlock(p, names)
		if err != nil {
			return nil, fmt.Errorf("content part %d: %w", i, err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// toolResultContent maps a tool message's parts to tool result content:
// text, images and documents.
func toolResultContent(parts []llm.Part, names *docNames) ([]types.ToolResultContentBlock, error) {
	blocks, err := partBlocks(parts, names)
	if err != nil {
		return nil, err
	}
	out := make([]types.ToolResultContentBlock, 0, len(blocks))
	for _, b := range blocks {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			out = append(out, &types.ToolResultContentBlockMemberText{Value: b.Value})
		case *types.ContentBlockMemberImage:
			out = append(out, &types.ToolResultContentBlockMemberImage{Value: b.Value})
		case *types.ContentBlockMemberDocument:
			out = append(out, &types.ToolResultContentBlockMemberDocument{Value: b.Value})
		}
	}
	return out, nil
}

// documentName makes filename a name Converse accepts: its extension
// dropped (the format carries it), every character but ASCII letters,
// digits, hyphens, parentheses and square brackets made a space, runs of
// spaces made one, at most maxDocumentName long; "document" when nothing
// is left.
func documentName(filename string) string {
	base := path.Base(strings.ReplaceAll(filename, `\`, "/"))
	base = strings.TrimSuffix(base, path.Ext(base))
	var b strings.Builder
	space := false
	for _, r := range base {
		ok := r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-()[]", r))
		if !ok {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		if b.Len() >= maxDocumentName {
			break
		}
	}
	name := strings.TrimSpace(b.String()[:min(b.Len(), maxDocumentName)])
	if name == "" {
		return "document"
	}
	return name
}

// partData returns a part's media type and bytes: Data with MediaType, or
// decoded from a data: URL.
func partData(p llm.Part) (string, []byte, error) {
	if p.URL == "" {
		if len(p.Data) == 0 {
			return "", nil, fmt.Errorf("no data")
		}
		if p.MediaType == "" {
			return "", nil, fmt.Errorf("bytes without a media type")
		}
		return strings.ToLower(p.MediaType), p.Data, nil
	}
	return imedia.SplitDataURL(p.URL)
}
