package anthropic

import (
	"net/http"
	"testing"
)

type markTransport struct{ next http.RoundTripper }

func (m markTransport) RoundTrip(r *http.Request) (*http.Response, error) { return m.next.RoundTrip(r) }

func TestWrapTransportWrapsTheDefaultClient(t *testing.T) {
	cfg := Config{WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return markTransport{rt} }}.withDefaults()
	if _, ok := cfg.HTTPClient.Transport.(markTransport); !ok {
		t.Fatalf("default client's transport is %T, want the wrapper", cfg.HTTPClient.Transport)
	}
	own := &http.Client{}
	cfg = Config{HTTPClient: own, WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return markTransport{rt} }}.withDefaults()
	if cfg.HTTPClient != own || own.Transport != nil {
		t.Fatal("the caller's client was changed")
	}
}
