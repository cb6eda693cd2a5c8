package oaiwire

import (
	"strings"
	"testing"
)

// FuzzSplitDataURL: splitDataURL, the one thing the parts writer parses
// (an audio part's data: URL), never panics, and what it returns is the
// URL's media type and payload.
func FuzzSplitDataURL(f *testing.F) {
	for _, s := range []string{"data:audio/wav;base64,UklG", "DATA:audio/mpeg;codecs=mp3;base64,SUQz", "data:,x", "data:audio/wav,x", "data:;base64,", "https://a/b", "data:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		mediaType, payload, ok := splitDataURL(u)
		if !ok {
			if mediaType != "" || payload != "" {
				t.Fatalf("splitDataURL(%q) refused but returned %q, %q", u, mediaType, payload)
			}
			return
		}
		if !strings.EqualFold(u[:5], "data:") || payload == "" || !strings.HasSuffix(u, ","+payload) ||
			!strings.HasPrefix(u[5:], mediaType) || strings.ContainsAny(mediaType, ";,") {
			t.Fatalf("splitDataURL(%q) = %q, %q", u, mediaType, payload)
		}
	})
}
