package media_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/media"
)

// img returns a w×h picture.
func img(w, h int) image.Image {
	m := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	for x := range w {
		m.SetColorIndex(x, x%h, 1)
	}
	return m
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, img(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpVP8X is the header of an extended WebP of w×h pixels.
func webpVP8X(w, h int) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00")
	w, h = w-1, h-1
	b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(h), byte(h>>8), byte(h>>16))
	return append(b, make([]byte, 8)...)
}

// webpVP8L is the header of a lossless WebP of w×h pixels.
func webpVP8L(w, h int) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f")
	v := uint32(w-1) | uint32(h-1)<<14
	b = binary.LittleEndian.AppendUint32(b, v)
	return append(b, make([]byte, 12)...)
}

// wavBytes is a 16-bit mono WAV of d at 8 kHz.
func wavBytes(d time.Duration) []byte {
	n := int(d.Seconds() * 8000 * 2)
	b := []byte("RIFF")
	b = binary.LittleEndian.AppendUint32(b, uint32(36+n))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1)     // PCM
	b = binary.LittleEndian.AppendUint16(b, 1)     // mono
	b = binary.LittleEndian.AppendUint32(b, 8000)  // sample rate
	b = binary.LittleEndian.AppendUint32(b, 16000) // byte rate
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, make([]byte, n)...)
}

// pdfBytes is a minimal PDF of pages pages.
func pdfBytes(pages int) []byte {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Count 3 >> endobj\n")
	for i := range pages {
		if i%2 == 0 {
			b.WriteString("3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n")
		} else {
			b.WriteString("4 0 obj <</Type/Page/Parent 2 0 R>> endobj\n")
		}
	}
	b.WriteString("5 0 obj << /Type /PageLabels >> endobj\n%%EOF\n")
	return []byte(b.String())
}

func TestSniff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
		want media.Info
	}{
		{"png", pngBytes(t, 31, 17), media.Info{MediaType: media.TypePNG, Width: 31, Height: 17}},
		{"jpeg", jpegBytes(t, 640, 480), media.Info{MediaType: media.TypeJPEG, Width: 640, Height: 480}},
		{"gif", gifBytes(t, 3, 300), media.Info{MediaType: media.TypeGIF, Width: 3, Height: 300}},
		{"webp extended", webpVP8X(4000, 3000), media.Info{MediaType: media.TypeWebP, Width: 4000, Height: 3000}},
		{"webp lossless", webpVP8L(1, 16384), media.Info{MediaType: media.TypeWebP, Width: 1, Height: 16384}},
		{"wav", wavBytes(1500 * time.Millisecond), media.Info{MediaType: media.TypeWAV, Duration: 1500 * time.Millisecond}},
		{"pdf", pdfBytes(3), media.Info{MediaType: media.TypePDF, Pages: 3}},
		{"mp3", []byte("ID3\x04\x00rest"), media.Info{MediaType: media.TypeMP3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := media.Sniff(tt.data)
			if err != nil || got != tt.want {
				t.Errorf("Sniff() = %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func TestSniffBad(t *testing.T) {
	t.Parallel()
	full := pngBytes(t, 8, 8)
	tests := []struct {
		name, data, want string
	}{
		{"text", "hello, world", "unrecognised"},
		{"empty", "", "unrecognised"},
		{"png cut short", string(full[:20]), "image/png header cut short"},
		{"png zero width", string(full[:16]) + "\x00\x00\x00\x00\x00\x00\x00\x08", "0×8"},
		{"jpeg without frame", "\xff\xd8\xff\xe0\x00\x04ab\xff\xda\x00\x02", "no frame header"},
		{"gif cut short", "GIF89a\x01", "image/gif header cut short"},
		{"webp unknown chunk", "RIFF\x00\x00\x00\x00WEBPABCD" + strings.Repeat("\x00", 20), "none of VP8"},
		{"wav without fmt", "RIFF\x00\x00\x00\x00WAVEdata\x00\x00\x00\x00", "without a fmt chunk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := media.Sniff([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Sniff(%q) = %+v, %v, want an error containing %q", tt.data, got, err, tt.want)
			}
		})
	}
	if _, err := media.Sniff([]byte("plain")); !errors.Is(err, media.ErrUnknownType) {
		t.Errorf("Sniff(plain) error = %v, want ErrUnknownType", err)
	}
}

func TestPDFPages(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 7} {
		got, err := media.PDFPages(pdfBytes(n))
		if err != nil || got != n {
			t.Errorf("PDFPages(%d-page PDF) = %d, %v, want %d", n, got, err, n)
		}
	}
	if _, err := media.PDFPages([]byte("not a pdf")); err == nil {
		t.Error("PDFPages(not a pdf) = nil error, want one")
	}
}

func dataURL(typ string, data []byte) string {
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(data)
}

func TestParseDataURL(t *testing.T) {
	t.Parallel()
	p := pngBytes(t, 10, 20)
	d, err := media.ParseDataURL(dataURL("image/png", p), 0)
	if err != nil || d.MediaType != "image/png" || !bytes.Equal(d.Data, p) || d.Info.Width != 10 || d.Info.Height != 20 {
		t.Fatalf("ParseDataURL(png) = %+v, %v, want the PNG, 10×20", d.Info, err)
	}
	j := jpegBytes(t, 4, 4)
	if d, err := media.ParseDataURL(dataURL("image/jpg", j), 0); err != nil || d.Info.MediaType != media.TypeJPEG {
		t.Errorf("ParseDataURL(image/jpg) = %+v, %v, want a JPEG", d.Info, err)
	}
	unpadded := "data:image/png;base64," + base64.RawURLEncoding.EncodeToString(p)
	if _, err := media.ParseDataURL(unpadded, 0); err != nil {
		t.Errorf("ParseDataURL(unpadded URL alphabet) = %v, want nil", err)
	}
	if d, err := media.ParseDataURL(dataURL("text/plain", []byte("hi")), 0); err != nil || string(d.Data) != "hi" {
		t.Errorf("ParseDataURL(text/plain) = %+v, %v, want its bytes", d, err)
	}
	tests := []struct {
		name, url, want string
		max             int64
	}{
		{"lying type", dataURL("image/png", j), "declared type image/png, but the bytes are image/jpeg", 0},
		{"text as image", dataURL("image/gif", []byte("GIF? no")), "declared type image/gif, but the bytes are not image/gif", 0},
		{"not base64", "data:image/png,hello", "not base64", 0},
		{"bad base64", "data:image/png;base64,!!!!", "not valid base64", 0},
		{"no comma", "data:image/png;base64", "without a comma", 0},
		{"no type", "data:;base64,aGk=", "no media type", 0},
		{"not data", "https://example.com/a.png", "not a data: URL", 0},
		{"too big", dataURL("image/png", p), "over the limit of 10", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := media.ParseDataURL(tt.url, tt.max)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseDataURL(%.40q) error = %v, want one containing %q", tt.url, err, tt.want)
			}
		})
	}
}

func TestDecodeDataURL(t *testing.T) {
	t.Parallel()
	typ, data, err := media.DecodeDataURL(dataURL("IMAGE/PNG", []byte("not really a png")), 0)
	if err != nil || typ != "image/png" || string(data) != "not really a png" {
		t.Errorf("DecodeDataURL = %q, %q, %v; want image/png and the bytes unchecked", typ, data, err)
	}
	for _, tt := range []struct {
		url  string
		max  int64
		want error
	}{
		{"https://x/a.png", 0, media.ErrNotDataURL},
		{"data:image/png;base64", 0, media.ErrDataURLSyntax},
		{"data:;base64,AAAA", 0, media.ErrDataURLNoType},
		{"data:image/png;base64,", 0, media.ErrDataURLNoData},
		{"data:image/png,raw", 0, media.ErrDataURLEncoded},
		{"data:image/png;base64,!!!!", 0, media.ErrDataURLBase64},
		{dataURL("image/png", make([]byte, 100)), 10, media.ErrDataURLSize},
	} {
		_, _, err := media.DecodeDataURL(tt.url, tt.max)
		if !errors.Is(err, tt.want) {
			t.Errorf("DecodeDataURL(%.30q) = %v, want %v", tt.url, err, tt.want)
		}
	}
}
