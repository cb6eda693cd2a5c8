package openai

import (
	"net/http"
	"testing"
)

type markTransport struct{ next http.RoundTripper }

func (m markTransport) RoundTrip(r *http.Request) (*http.Response, error) { return m.next.RoundTrip(r) }

func TestWrapTransportWrapsTheDefaultClient(t *testing.T) {
	wrap := func(rt http.RoundTripper) http.RoundTripper { return markTransport{rt} }
	m, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", WrapTransport: wrap})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.httpClient.Transport.(markTransport); !ok {
		t.Fatalf("default client's transport is %T, want the wrapper", m.httpClient.Transport)
	}
	own := &http.Client{}
	m, err = New(Config{BaseURL: "http://127.0.0.1:1/v1", HTTPClient: own, WrapTransport: wrap})
	if err != nil {
		t.Fatal(err)
	}
	if m.httpClient != own || own.Transport != nil {
		t.Fatal("the caller's client was changed")
	}
}
