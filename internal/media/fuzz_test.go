package media_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// seeds are the fuzz targets' seed corpus: one file of every type Sniff
// knows, and broken headers.
func seeds(f *testing.F) [][]byte {
	f.Helper()
	return [][]byte{
		pngBytes(f, 3, 2), jpegBytes(f, 9, 5), gifBytes(f, 2, 7),
		webpVP8X(300, 200), webpVP8L(5, 6), wavBytes(100 * time.Millisecond),
		pdfBytes(2), []byte("ID3\x03"), []byte("\xff\xd8\xff\xe0\x00\x01"),
		[]byte("RIFF\x00\x00\x00\x00WAVEfmt \xff\xff\xff\xff"), []byte("%PDF-/Type/Page"), nil,
	}
}

func FuzzSniff(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := media.Sniff(data)
		if err != nil {
			return
		}
		if info.MediaType == "" || info.Width < 0 || info.Height < 0 || info.Pages < 0 || info.Duration < 0 {
			t.Errorf("Sniff(%q) = %+v, want a type and no negative size", data, info)
		}
		if (info.Width == 0) != (info.Height == 0) {
			t.Errorf("Sniff(%q) = %+v: one side zero", data, info)
		}
	})
}

func FuzzPDFPages(f *testing.F) {
	f.Add(pdfBytes(3))
	f.Add([]byte("%PDF-1.7 /Type /Page/Type/Pages /Type\n/Page>>"))
	f.Add([]byte("%PDF-"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := media.PDFPages(data)
		if err == nil && (n < 0 || n > media.MaxPDFPages || n > len(data)/5) {
			t.Errorf("PDFPages(%q) = %d, want within [0, %d]", data, n, len(data)/5)
		}
	})
}

func FuzzParseDataURL(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(dataURL("image/png", s))
		f.Add(dataURL("application/pdf", s))
	}
	f.Add("data:image/png,abc")
	f.Add("data:;base64,")
	f.Add("DATA:IMAGE/JPG;charset=x;base64,/9j/")
	f.Fuzz(func(t *testing.T, u string) {
		d, err := media.ParseDataURL(u, 1<<20)
		if err != nil {
			return
		}
		if len(d.Data) > 1<<20 || d.MediaType == "" {
			t.Errorf("ParseDataURL(%q) = %q, %d bytes", u, d.MediaType, len(d.Data))
		}
		if strings.HasPrefix(d.MediaType, "image/") && d.Info.MediaType != media.Canonical(d.MediaType) {
			t.Errorf("ParseDataURL(%q): declared %s, sniffed %s", u, d.MediaType, d.Info.MediaType)
		}
	})
}

func FuzzTokens(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s, "auto")
	}
	f.Fuzz(func(t *testing.T, data []byte, detail string) {
		for _, k := range []llm.PartKind{llm.PartImage, llm.PartFile, llm.PartAudio} {
			p := llm.Part{Kind: k, Data: data, Detail: detail}
			for _, b := range []media.Billing{media.BillingOpenAI, media.BillingAnthropic} {
				if n := media.Tokens(&p, b); n < 1 {
					t.Errorf("Tokens(%s of %q, %s) = %d, want ≥ 1", k, data, b, n)
				}
			}
		}
	})
}
