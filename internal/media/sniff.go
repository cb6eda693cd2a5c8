package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The media types [Sniff] recognises.
const (
	TypePNG  = "image/png"
	TypeJPEG = "image/jpeg"
	TypeGIF  = "image/gif"
	TypeWebP = "image/webp"
	TypePDF  = "application/pdf"
	TypeWAV  = "audio/wav"
	TypeMP3  = "audio/mpeg"
)

// ErrUnknownType is returned by [Sniff] for bytes of no type it recognises.
var ErrUnknownType = errors.New("media: unrecognised media type")

// Info is what [Sniff] read from media's bytes. Fields it could not read
// are zero.
type Info struct {
	// MediaType is the type the bytes are, one of the Type constants.
	MediaType string
	// Width and Height are an image's size in pixels.
	Width, Height int
	// Pages is a PDF's page count.
	Pages int
	// Duration is a WAV recording's length.
	Duration time.Duration
}

// Sniff reads the type of data from its leading bytes and, by type, an
// image's size, a PDF's page count or a WAV's duration. It returns
// ErrUnknownType (wrapped) for bytes of no type it knows, and an error
// naming the type for a header that is cut short or malformed. It does
// not keep data.
func Sniff(data []byte) (Info, error) {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return sniffPNG(data)
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return sniffJPEG(data)
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return sniffGIF(data)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return sniffWebP(data)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WAVE":
		return sniffWAV(data)
	case bytes.HasPrefix(data, []byte("%PDF-")):
		n, err := PDFPages(data)
		return Info{MediaType: TypePDF, Pages: n}, err
	case bytes.HasPrefix(data, []byte("ID3")), len(data) >= 2 && data[0] == 0xff && data[1]&0xe0 == 0xe0:
		return Info{MediaType: TypeMP3}, nil
	}
	return Info{}, fmt.Errorf("%w (%d bytes, starting %q)", ErrUnknownType, len(data), data[:min(len(data), 8)])
}

// maxPixels bounds a sniffed image's sides: no format here allows more
// than 2^24 (WebP) and a larger value is a corrupt header.
const maxPixels = 1 << 24

func sized(typ string, w, h int) (Info, error) {
	if w <= 0 || h <= 0 || w > maxPixels || h > maxPixels {
		return Info{}, fmt.Errorf("media: %s header gives a size of %d×%d pixels", typ, w, h)
	}
	return Info{MediaType: typ, Width: w, Height: h}, nil
}

// sniffPNG reads the IHDR chunk, which the format puts first.
func sniffPNG(data []byte) (Info, error) {
	if len(data) < 24 || string(data[12:16]) != "IHDR" {
		return Info{}, fmt.Errorf("media: %s header cut short or without IHDR", TypePNG)
	}
	return sized(TypePNG, int(binary.BigEndian.Uint32(data[16:20])), int(binary.BigEndian.Uint32(data[20:24])))
}

// sniffJPEG walks the markers to the first start-of-frame segment.
func sniffJPEG(data []byte) (Info, error) {
	i := 2
	for i+4 <= len(data) {
		if data[i] != 0xff {
			return Info{}, fmt.Errorf("media: %s marker expected at byte %d", TypeJPEG, i)
		}
		marker := data[i+1]
		switch {
		case marker == 0xff: // fill byte
			i++
			continue
		case marker == 0xd8 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7):
			i += 2 // markers without a length
			continue
		}
		n := int(binary.BigEndian.Uint16(data[i+2 : i+4]))
		if n < 2 {
			return Info{}, fmt.Errorf("media: %s segment at byte %d has length %d", TypeJPEG, i, n)
		}
		// SOF0..SOF15 except DHT (c4), JPG (c8) and DAC (cc).
		if marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc {
			if i+9 > len(data) {
				break
			}
			return sized(TypeJPEG, int(binary.BigEndian.Uint16(data[i+7:i+9])), int(binary.BigEndian.Uint16(data[i+5:i+7])))
		}
		if marker == 0xda || marker == 0xd9 { // scan or end before a frame header
			break
		}
		i += 2 + n
	}
	return Info{}, fmt.Errorf("media: %s has no frame header (SOF) before its data", TypeJPEG)
}

// sniffGIF reads the logical screen descriptor.
func sniffGIF(data []byte) (Info, error) {
	if len(data) < 10 {
		return Info{}, fmt.Errorf("media: %s header cut short", TypeGIF)
	}
	return sized(TypeGIF, int(binary.LittleEndian.Uint16(data[6:8])), int(binary.LittleEndian.Uint16(data[8:10])))
}

// sniffWebP reads the first chunk: VP8 (lossy), VP8L (lossless) or VP8X
// (extended).
func sniffWebP(data []byte) (Info, error) {
	if len(data) < 30 {
		return Info{}, fmt.Errorf("media: %s header cut short", TypeWebP)
	}
	c := data[12:]
	switch string(c[:4]) {
	case "VP8 ":
		if c[11] != 0x9d || c[12] != 0x01 || c[13] != 0x2a {
			return Info{}, fmt.Errorf("media: %s VP8 frame without its start code", TypeWebP)
		}
		return sized(TypeWebP, int(binary.LittleEndian.Uint16(c[14:16])&0x3fff), int(binary.LittleEndian.Uint16(c[16:18])&0x3fff))
	case "VP8L":
		if c[8] != 0x2f {
			return Info{}, fmt.Errorf("media: %s VP8L frame without its signature", TypeWebP)
		}
		b := binary.LittleEndian.Uint32(c[9:13])
		return sized(TypeWebP, int(b&0x3fff)+1, int(b>>14&0x3fff)+1)
	case "VP8X":
		w := int(c[12]) | int(c[13])<<8 | int(c[14])<<16
		h := int(c[15]) | int(c[16])<<8 | int(c[17])<<16
		return sized(TypeWebP, w+1, h+1)
	}
	return Info{}, fmt.Errorf("media: %s first chunk %q is none of VP8, VP8L, VP8X", TypeWebP, c[:4])
}

// maxChunks bounds the RIFF chunks sniffWAV walks.
const maxChunks = 64

// sniffWAV reads the fmt chunk's byte rate and the data chunk's size.
func sniffWAV(data []byte) (Info, error) {
	var byteRate, size uint32
	i := 12
	for range maxChunks {
		if i+8 > len(data) {
			break
		}
		id, n := string(data[i:i+4]), binary.LittleEndian.Uint32(data[i+4:i+8])
		switch id {
		case "fmt ":
			if i+20 > len(data) {
				return Info{}, fmt.Errorf("media: %s fmt chunk cut short", TypeWAV)
			}
			byteRate = binary.LittleEndian.Uint32(data[i+16 : i+20])
		case "data":
			size = n
		}
		if id == "data" {
			break
		}
		i += 8 + int(n) + int(n&1) // chunks are padded to even sizes
		if i < 0 {
			break
		}
	}
	if byteRate == 0 {
		return Info{}, fmt.Errorf("media: %s without a fmt chunk giving its byte rate", TypeWAV)
	}
	return Info{MediaType: TypeWAV, Duration: time.Duration(float64(size) / float64(byteRate) * float64(time.Second))}, nil
}
