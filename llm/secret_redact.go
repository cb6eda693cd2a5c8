package llm

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
)

// MinRedactLen is the length, in bytes, from which a secret is redacted in
// all its forms (see [Redactor]). A shorter secret is redacted only where it
// appears verbatim: its encodings and case variants are too short to be told
// from ordinary text.
const MinRedactLen = 8

// markers are the texts a Redactor puts in place of a secret: the first
// that shares no characters at its edges with any form of the secrets (see
// newRedactor), so that a marker and the text around it can never spell a
// secret again.
var markers = []string{"[REDACTED]", "<redacted>", "(redacted)", "{redacted}", "***"}

// A Redactor removes secrets from text, in the forms a server, a proxy or a
// log line may echo them in:
//
//   - verbatim, upper-cased, lower-cased or in any mix of cases (ASCII
//     letters are compared case-insensitively in every form below);
//   - URL-encoded, as a query value (url.QueryEscape) or a path segment
//     (url.PathEscape);
//   - hex-encoded;
//   - base64-encoded, in the standard or URL alphabet, padded or not,
//     alone or inside a longer encoded text such as the base64 of
//     "user:SECRET" or ":SECRET" of an HTTP Basic Authorization header
//     (the part of the encoding that depends on the secret alone is
//     removed, whatever comes before or after it).
//
// Each occurrence, or run of overlapping occurrences, becomes "[REDACTED]"
// (or another marker when a secret itself looks like that one). Secrets
// shorter than [MinRedactLen] are replaced only verbatim.
//
// A nil *Redactor removes nothing. A Redactor is immutable and safe for
// concurrent use. Its methods never show the secrets: printing a Redactor
// shows a placeholder.
type Redactor struct {
	// long are the lower-cased forms of the secrets of MinRedactLen bytes
	// or more, longest first.
	long []string
	// minLong is the length of the shortest of long.
	minLong int
	// pairs is a bit set of the first two bytes, lower-cased, of the forms
	// in long: a position where none starts is passed over at once.
	pairs *[1 << 16 / 64]uint64
	// short are the secrets shorter than MinRedactLen, replaced verbatim.
	short []string
	// marker replaces what is removed.
	marker string
}

// NewRedactor returns a Redactor of secrets; empty ones are ignored. It
// returns nil, which removes nothing, when no secret is left.
func NewRedactor(secrets ...Secret) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		switch {
		case s == "":
		case len(s) < MinRedactLen:
			r.short = append(r.short, string(s))
		default:
			r.long = append(r.long, secretForms(string(s))...)
		}
	}
	if len(r.long) == 0 && len(r.short) == 0 {
		return nil
	}
	slices.SortFunc(r.long, func(a, b string) int { return len(b) - len(a) })
	r.long = slices.Compact(r.long)
	r.marker = markers[0]
	for _, m := range markers {
		if !slices.ContainsFunc(r.long, func(f string) bool { return overlaps(m, f) }) {
			r.marker = m
			break
		}
	}
	if len(r.long) > 0 {
		r.minLong = len(r.long[len(r.long)-1])
		r.pairs = new([1 << 16 / 64]uint64)
		for _, f := range r.long {
			p := uint16(f[0])<<8 | uint16(f[1])
			r.pairs[p/64] |= 1 << (p % 64)
		}
	}
	return r
}

// Redactor returns a Redactor of s; see [NewRedactor].
func (s Secret) Redactor() *Redactor { return NewRedactor(s) }

// Redact returns text with s removed in every form a [Redactor] knows. It
// builds the forms on each call: to redact many texts, build a Redactor
// once with [Secret.Redactor].
func (s Secret) Redact(text string) string { return s.Redactor().Redact(text) }

// String shows a placeholder, never the secrets.
func (r *Redactor) String() string { return "llm.Redactor([REDACTED])" }

// GoString shows a placeholder, for %#v.
func (r *Redactor) GoString() string { return r.String() }

// Redact returns text with every occurrence of the secrets removed; see
// [Redactor]. It allocates only when it finds one.
func (r *Redactor) Redact(text string) string {
	if r == nil {
		return text
	}
	for _, s := range r.short {
		text = strings.ReplaceAll(text, s, r.marker)
	}
	if len(r.long) == 0 || len(text) < r.minLong {
		return text
	}
	var (
		b          strings.Builder
		copied     int     // text[:copied] is in b
		start, end = 0, -1 // the run of occurrences being merged; end < 0: none
	)
	for i := 0; i+r.minLong <= len(text); i++ {
		p := uint16(lower(text[i]))<<8 | uint16(lower(text[i+1]))
		if r.pairs[p/64]&(1<<(p%64)) == 0 {
			continue
		}
		for _, f := range r.long { // longest first: the furthest end
			if len(f) > len(text)-i || !hasPrefixFold(text[i:], f) {
				continue
			}
			switch {
			case end < 0:
				b.Grow(len(text))
				start, end = i, i+len(f)
			case i <= end:
				end = max(end, i+len(f))
			default:
				b.WriteString(text[copied:start])
				b.WriteString(r.marker)
				copied, start, end = end, i, i+len(f)
			}
			break
		}
	}
	if end < 0 {
		return text
	}
	b.WriteString(text[copied:start])
	b.WriteString(r.marker)
	b.WriteString(text[end:])
	return b.String()
}

// secretForms returns the lower-cased forms of s that a Redactor looks for.
func secretForms(s string) []string {
	forms := []string{s, url.QueryEscape(s), url.PathEscape(s), hex.EncodeToString([]byte(s))}
	// The base64 encoding of a text holding s at an offset of a (mod 3)
	// bytes contains the characters that depend on s's bytes alone: those
	// of the encoding of a filler bytes and s from the first character
	// after the filler's bits to the last one before the text that follows.
	for a := range 3 {
		buf := make([]byte, a+len(s))
		copy(buf[a:], s)
		from, to := (8*a+5)/6, 8*(a+len(s))/6
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString(buf)[from:to])
		}
	}
	for i, f := range forms {
		forms[i] = lowerASCII(f)
	}
	return forms
}

// overlaps reports whether a and b, compared case-insensitively, share
// text: one contains the other, or one ends with what the other starts
// with.
func overlaps(a, b string) bool {
	a, b = lowerASCII(a), lowerASCII(b)
	if strings.Contains(a, b) || strings.Contains(b, a) {
		return true
	}
	for k := 1; k < min(len(a), len(b)); k++ {
		if a[len(a)-k:] == b[:k] || b[len(b)-k:] == a[:k] {
			return true
		}
	}
	return false
}

// lower lower-cases an ASCII letter.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lowerASCII lower-cases the ASCII letters of s and keeps its other bytes.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

// hasPrefixFold reports whether s starts with prefix, which is lower-cased,
// comparing ASCII letters case-insensitively.
func hasPrefixFold(s, prefix string) bool {
	for i := range len(prefix) {
		if lower(s[i]) != prefix[i] {
			return false
		}
	}
	return true
}

// Origin returns the scheme and host (with its port, if any) of a URL, as
// "scheme://host:port": the only part of a backend's URL that errors, logs
// and results may show, since its path, query and user information may hold
// a secret. It returns "" for a text that is not such a URL.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// URLSecrets returns the parts of a backend's URL that may hold a secret,
// for [NewRedactor]: its path (unless it is empty, "/" or "/v1") and each
// of its segments, its query and each query value (or each pair without
// "="), its user information, user name and password, each as written and
// unescaped. A server may echo the whole path, as in "Cannot POST
// /TOKEN/v1/chat/completions", or just the token, as in "invalid token
// TOKEN". Every such part of at least [MinRedactLen] bytes counts as a
// secret, whatever it looks like; shorter ones, which cannot be told from
// ordinary text, are left out and stay visible in errors: a "v1" segment,
// a deployment or model name under 8 bytes. Longer ordinary parts (a
// "deployments" segment, an "api-version" value) are redacted too. It
// returns nil for a text that does not parse.
func URLSecrets(raw string) []Secret {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []Secret
	add := func(ss ...string) {
		for _, s := range ss {
			if len(s) >= MinRedactLen && !slices.Contains(out, Secret(s)) {
				out = append(out, Secret(s))
			}
		}
	}
	if p := strings.TrimRight(u.Path, "/"); p != "" && p != "/v1" {
		add(u.EscapedPath(), u.Path)
		add(strings.Split(u.EscapedPath(), "/")...)
		add(strings.Split(u.Path, "/")...)
	}
	if u.RawQuery != "" {
		q, _ := url.QueryUnescape(u.RawQuery)
		add(u.RawQuery, q)
		for pair := range strings.SplitSeq(u.RawQuery, "&") {
			v := pair
			if _, after, ok := strings.Cut(pair, "="); ok {
				v = after
			}
			uv, _ := url.QueryUnescape(v)
			add(v, uv)
		}
	}
	if u.User != nil {
		add(u.User.String(), u.User.Username())
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
	}
	return out
}

// HideURLs rewrites, in place, the URL of every [*url.Error] in err's tree
// to its [Origin] ("[URL]" when it has none), and returns err. An *url.Error
// of net/http quotes the whole request URL (`Post
// "http://host/TOKEN/v1/chat/completions": dial tcp ...`); once hidden, the
// error's text names only the server. Use it on the error a call returned,
// before it becomes message text or is wrapped by fmt.Errorf, which fixes
// the text of what it wraps when it is called.
func HideURLs(err error) error {
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			if ue, ok := e.(*url.Error); ok {
				if o := Origin(ue.URL); o != "" {
					ue.URL = o
				} else {
					ue.URL = "[URL]"
				}
			}
			switch x := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range x.Unwrap() {
					walk(inner)
				}
				return
			default:
				e = errors.Unwrap(e)
			}
		}
	}
	walk(err)
	return err
}
