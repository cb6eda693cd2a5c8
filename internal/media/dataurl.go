package media

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// A DataURL is a parsed data: URL.
type DataURL struct {
	// MediaType is the type the URL declares, lower case, without
	// parameters; its bytes sniff as this type where [Sniff] knows it.
	MediaType string
	// Data is the decoded payload.
	Data []byte
	// Info is what [Sniff] read from Data; zero where Sniff does not know
	// the type.
	Info Info
}

// ParseDataURL parses a data: URL ("data:image/png;base64,…"). The
// payload must be base64 (standard or URL alphabet, padding optional;
// whitespace is ignored). The declared type must agree with the bytes:
// where either the declared type or the sniffed one is a type [Sniff]
// knows, they must be the same, so an image whose declared type lies is
// an error naming both. maxBytes, when > 0, caps the decoded size (checked
// before decoding). Errors name what is wrong; they never hold the
// payload.
func ParseDataURL(u string, maxBytes int64) (DataURL, error) {
	typ, data, err := DecodeDataURL(u, maxBytes)
	if err != nil {
		return DataURL{}, err
	}
	info, err := Check(typ, data)
	if err != nil {
		return DataURL{}, err
	}
	return DataURL{MediaType: typ, Data: data, Info: info}, nil
}

// What is wrong with a data: URL, for callers that word their own
// messages: [DecodeDataURL]'s errors wrap one of these.
var (
	ErrNotDataURL     = errors.New("not a data: URL")
	ErrDataURLSyntax  = errors.New("data: URL without a comma before its data")
	ErrDataURLNoType  = errors.New("data: URL declares no media type")
	ErrDataURLNoData  = errors.New("data: URL with no data")
	ErrDataURLEncoded = errors.New("data: URL is not base64") // percent-encoded, not ;base64
	ErrDataURLBase64  = errors.New("data: URL payload is not valid base64")
	ErrDataURLSize    = errors.New("data: URL over the size limit")
)

// DecodeDataURL is the strict reading of a data: URL that [ParseDataURL]
// makes, without checking the bytes against the declared type: the media
// type (lower case, without parameters) and the decoded bytes. The
// payload must be base64 (standard or URL alphabet, padding optional;
// whitespace is ignored) and not empty; maxBytes, when > 0, caps the
// decoded size (checked before decoding). Its errors match
// ErrNotDataURL or one of the ErrDataURL… values (errors.Is), name what
// is wrong, and never hold the payload.
func DecodeDataURL(u string, maxBytes int64) (string, []byte, error) {
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return "", nil, dataURLErr(ErrNotDataURL, "media: not a data: URL")
	}
	head, payload, ok := strings.Cut(u[5:], ",")
	if !ok {
		return "", nil, dataURLErr(ErrDataURLSyntax, "media: data: URL without a comma before its data")
	}
	params := strings.Split(head, ";")
	typ := strings.ToLower(strings.TrimSpace(params[0]))
	b64 := false
	for _, p := range params[1:] {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			b64 = true
		}
	}
	if !b64 {
		return "", nil, dataURLErr(ErrDataURLEncoded, "media: data: URL of type %q is not base64 (want data:TYPE;base64,…)", typ)
	}
	if typ == "" {
		return "", nil, dataURLErr(ErrDataURLNoType, "media: data: URL declares no media type")
	}
	if strings.TrimSpace(payload) == "" {
		return "", nil, dataURLErr(ErrDataURLNoData, "media: data: URL of type %s holds no data", typ)
	}
	if maxBytes > 0 && int64(base64.StdEncoding.DecodedLen(len(payload))) > maxBytes+3 {
		return "", nil, dataURLErr(ErrDataURLSize, "media: data: URL of type %s holds about %d bytes, over the limit of %d", typ, base64.StdEncoding.DecodedLen(len(payload)), maxBytes)
	}
	data, err := decodeBase64(payload)
	if err != nil {
		return "", nil, &dataURLError{msg: fmt.Sprintf("media: data: URL of type %s: payload is not valid base64: %v", typ, err), kind: ErrDataURLBase64, cause: err}
	}
	if maxBytes > 0 && int64(len(data)) > maxBytes {
		return "", nil, dataURLErr(ErrDataURLSize, "media: data: URL of type %s holds %d bytes, over the limit of %d", typ, len(data), maxBytes)
	}
	return typ, data, nil
}

// dataURLError is an error of DecodeDataURL: its own message, matching
// one ErrDataURL… value with errors.Is.
type dataURLError struct {
	msg   string
	kind  error
	cause error // the base64 decoder's error, or nil
}

func (e *dataURLError) Error() string        { return e.msg }
func (e *dataURLError) Is(target error) bool { return target == e.kind }
func (e *dataURLError) Unwrap() error        { return e.cause }

func dataURLErr(kind error, format string, args ...any) error {
	return &dataURLError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// decodeBase64 decodes s in the standard or URL alphabet, padded or not,
// ignoring whitespace.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		case '-':
			return '+'
		case '_':
			return '/'
		}
		return r
	}, s)
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// aliases maps media types' other spellings to the one Sniff returns.
var aliases = map[string]string{
	"image/jpg":      TypeJPEG,
	"image/pjpeg":    TypeJPEG,
	"audio/x-wav":    TypeWAV,
	"audio/wave":     TypeWAV,
	"audio/vnd.wave": TypeWAV,
	"audio/mp3":      TypeMP3,
}

// Canonical returns the spelling of media type t that [Sniff] returns
// (image/jpg → image/jpeg, audio/x-wav → audio/wav), lower case, without
// parameters.
func Canonical(t string) string {
	t, _, _ = strings.Cut(t, ";")
	t = strings.ToLower(strings.TrimSpace(t))
	if c, ok := aliases[t]; ok {
		return c
	}
	return t
}

// known reports whether Sniff recognises type t.
func known(t string) bool {
	switch t {
	case TypePNG, TypeJPEG, TypeGIF, TypeWebP, TypePDF, TypeWAV, TypeMP3:
		return true
	}
	return false
}

// Check sniffs data and checks it against its declared media type: where
// either is a type [Sniff] knows, they must agree ([Canonical] spellings
// count as one), so "image/png" over JPEG bytes is an error naming both.
// A declared type Sniff does not know, over bytes it does not know either,
// passes with a zero Info's type set to the declared one.
func Check(declared string, data []byte) (Info, error) {
	want := Canonical(declared)
	info, err := Sniff(data)
	switch {
	case err != nil && errors.Is(err, ErrUnknownType):
		if known(want) {
			return Info{}, fmt.Errorf("media: declared type %s, but the bytes are not %s: %v", declared, want, err)
		}
		return Info{MediaType: want}, nil
	case err != nil:
		return Info{}, fmt.Errorf("declared type %s: %w", declared, err)
	case info.MediaType != want:
		return Info{}, fmt.Errorf("media: declared type %s, but the bytes are %s", declared, info.MediaType)
	}
	return info, nil
}

// SplitDataURL returns the media type (lower case) and bytes of a data:
// URL (RFC 2397), base64 or percent-encoded, with no size cap or type
// check: what a backend sends on as bytes. ParseDataURL is the strict
// reading for what users give.
func SplitDataURL(u string) (string, []byte, error) {
	if len(u) < len("data:") || !strings.EqualFold(u[:len("data:")], "data:") {
		return "", nil, fmt.Errorf("not a data URL")
	}
	meta, payload, ok := strings.Cut(u[len("data:"):], ",")
	if !ok {
		return "", nil, fmt.Errorf("data URL has no comma before its data")
	}
	params := strings.Split(meta, ";")
	mediaType := strings.ToLower(strings.TrimSpace(params[0]))
	if mediaType == "" {
		return "", nil, fmt.Errorf("data URL names no media type")
	}
	if strings.EqualFold(params[len(params)-1], "base64") {
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return "", nil, fmt.Errorf("data URL is not valid base64: %v", err)
		}
		return mediaType, b, nil
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return "", nil, fmt.Errorf("data URL: %v", err)
	}
	return mediaType, []byte(s), nil
}
