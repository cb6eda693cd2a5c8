package llm_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// asciiCase maps the ASCII letters of s with f and keeps its other bytes.
func asciiCase(s string, f func(byte) byte) string {
	b := []byte(s)
	for i := range b {
		b[i] = f(b[i])
	}
	return string(b)
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c - 'A' + 'a'
	}
	return c
}

// keyForms returns the transformations of key a server may echo, named:
// what no redacted text may contain.
func keyForms(key string) map[string]string {
	forms := map[string]string{
		"verbatim":           key,
		"upper":              asciiCase(key, upper),
		"lower":              asciiCase(key, lower),
		"query escape":       url.QueryEscape(key),
		"path escape":        url.PathEscape(key),
		"query escape upper": asciiCase(url.QueryEscape(key), upper),
		"hex":                hex.EncodeToString([]byte(key)),
		"hex upper":          strings.ToUpper(hex.EncodeToString([]byte(key))),
	}
	encs := map[string]*base64.Encoding{
		"std": base64.StdEncoding, "url": base64.URLEncoding, "raw std": base64.RawStdEncoding, "raw url": base64.RawURLEncoding,
	}
	for name, enc := range encs {
		forms["base64 "+name] = enc.EncodeToString([]byte(key))
		forms["base64 "+name+" of user:key"] = enc.EncodeToString([]byte("user:" + key))
		forms["base64 "+name+" of :key"] = enc.EncodeToString([]byte(":" + key))
		forms["base64 "+name+" of Bearer key"] = enc.EncodeToString([]byte("Bearer " + key))
	}
	return forms
}

// leaked returns the name of a form of key that text contains, or "".
func leaked(text, key string) string {
	for name, f := range keyForms(key) {
		if strings.Contains(text, f) {
			return name
		}
	}
	return ""
}

func TestRedactForms(t *testing.T) {
	keys := []string{"sk-test-secret-0123456789", "sk-ant-api03-AbC+dEf/GhI=jKl?m&n o", "abcdefgh", "0123456789abcdef0123"}
	for _, key := range keys {
		r := llm.Secret(key).Redactor()
		for name, form := range keyForms(key) {
			t.Run(key+"/"+name, func(t *testing.T) {
				text := "server said: invalid credential " + form + ", try again"
				got := r.Redact(text)
				if what := leaked(got, key); what != "" {
					t.Errorf("Redact(%q) = %q: still shows the key's %s form", text, got, what)
				}
				if !strings.HasPrefix(got, "server said: invalid credential ") || !strings.HasSuffix(got, ", try again") || !strings.Contains(got, "[REDACTED]") {
					t.Errorf("Redact(%q) = %q, want the text around the key kept and [REDACTED] in its place", text, got)
				}
			})
		}
	}
}

func TestRedactKeepsOtherText(t *testing.T) {
	r := llm.Secret("sk-test-secret-0123456789").Redactor()
	for _, text := range []string{"", "x", "invalid key sk-test-secret-012345678", "nothing to see here, SK-TEST but not the key", strings.Repeat("a", 5000)} {
		if got := r.Redact(text); got != text {
			t.Errorf("Redact(%q) = %q, want it unchanged", text, got)
		}
	}
	if got := (*llm.Redactor)(nil).Redact("sk-test"); got != "sk-test" {
		t.Errorf("nil Redactor: Redact = %q, want the text unchanged", got)
	}
	if r := llm.NewRedactor("", ""); r != nil {
		t.Errorf("NewRedactor of empty secrets = %v, want nil", r)
	}
}

func TestRedactMerges(t *testing.T) {
	key := "sk-test-secret-0123456789"
	r := llm.Secret(key).Redactor()
	text := "a " + key + strings.ToUpper(key) + " b " + key
	if got, want := r.Redact(text), "a [REDACTED] b [REDACTED]"; got != want {
		t.Errorf("Redact(%q) = %q, want %q", text, got, want)
	}
}

func TestRedactShortSecret(t *testing.T) {
	r := llm.Secret("abc").Redactor()
	if got, want := r.Redact("abc ABC YWJj"), "[REDACTED] ABC YWJj"; got != want {
		t.Errorf("Redact = %q, want %q (a short secret is replaced verbatim only)", got, want)
	}
}

// TestRedactMarkerCannotSpellKey uses keys that start or end like the
// marker: text around a marker must never spell the key again.
func TestRedactMarkerCannotSpellKey(t *testing.T) {
	for _, key := range []string{"TED]abcdefg", "abcdefg[RED", "[REDACTED]x", "REDACTED"} {
		r := llm.Secret(key).Redactor()
		text := strings.ToLower(key) + key[len(key)/2:] + " " + key[:len(key)/2] + strings.ToUpper(key)
		if got := r.Redact(text); leaked(got, key) != "" {
			t.Errorf("key %q: Redact(%q) = %q, which shows the key's %s form", key, text, got, leaked(got, key))
		}
	}
}

func TestRedactorPrintsNoSecret(t *testing.T) {
	r := llm.Secret("sk-test-secret-0123456789").Redactor()
	for _, out := range []string{fmt.Sprint(r), fmt.Sprintf("%v %+v %#v %s", r, r, r, r)} {
		if strings.Contains(out, "secret-0123") {
			t.Errorf("printing a Redactor shows the secret: %s", out)
		}
	}
}

func TestOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:8080/SECRET/v1/chat/completions?key=x": "http://127.0.0.1:8080",
		"https://user:pass@api.example.com/v1":                   "https://api.example.com",
		"not a url":                                              "",
		"/relative/path":                                         "",
	} {
		if got := llm.Origin(raw); got != want {
			t.Errorf("Origin(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestURLSecrets(t *testing.T) {
	got := llm.URLSecrets("http://u:PASSWORD@127.0.0.1:1/PATH%2FTOKEN/v1?key=QUERY")
	want := []llm.Secret{"/PATH%2FTOKEN/v1", "/PATH/TOKEN/v1", "PATH%2FTOKEN", "key=QUERY", "u:PASSWORD", "PASSWORD"}
	if !slices.Equal(got, want) {
		t.Errorf("URLSecrets = %q, want %q", plain(got), plain(want))
	}
	got = llm.URLSecrets("http://USERNAME1:pw@h/v1/PATHTOKEN/deploy?api-version=2024-02-01&key=QUERY%2BTOKEN&BARETOKEN")
	want = []llm.Secret{
		"/v1/PATHTOKEN/deploy", "PATHTOKEN",
		"api-version=2024-02-01&key=QUERY%2BTOKEN&BARETOKEN", "api-version=2024-02-01&key=QUERY+TOKEN&BARETOKEN",
		"2024-02-01", "QUERY%2BTOKEN", "QUERY+TOKEN", "BARETOKEN",
		"USERNAME1:pw", "USERNAME1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("URLSecrets = %q, want %q", plain(got), plain(want))
	}
	for _, raw := range []string{"http://127.0.0.1:1", "http://127.0.0.1:1/", "http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1/", "http://u:pw@h/abc?a=b", "http://h/openai?a=b&c", "%zz"} {
		if got := llm.URLSecrets(raw); got != nil {
			t.Errorf("URLSecrets(%q) = %q, want none", raw, plain(got))
		}
	}
}

// plain shows test secrets, which print as placeholders.
func plain(ss []llm.Secret) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// TestURLSecretsEchoedAlone redacts a token of the URL that a server echoes
// on its own, not as the whole path or query it was sent in.
func TestURLSecretsEchoedAlone(t *testing.T) {
	r := llm.NewRedactor(llm.URLSecrets("http://bob-the-user:PASSWORD@127.0.0.1:1/sk-PATHTOKEN/v1?x=1&key=QUERYTOKEN")...)
	for _, tt := range []struct{ echo, want string }{
		{"invalid token sk-PATHTOKEN", "invalid token [REDACTED]"},
		{"unknown key QUERYTOKEN for x=1", "unknown key [REDACTED] for x=1"},
		{"user bob-the-user: denied", "user [REDACTED]: denied"},
		{"route /v1/chat/completions not found", "route /v1/chat/completions not found"},
	} {
		if got := r.Redact(tt.echo); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.echo, got, tt.want)
		}
	}
}

// TestHideURLs sends a request to a closed port: net/http's error quotes
// the whole URL, and HideURLs leaves only its scheme and host.
func TestHideURLs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/PATHTOKEN/v1/chat/completions?q=QUERYTOKEN", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&http.Client{}).Do(req)
	if err == nil {
		t.Fatal("request to a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "PATHTOKEN") {
		t.Fatalf("error %q does not quote the URL: the test proves nothing", err)
	}
	wrapped := errors.Join(errors.New("first"), err)
	got := fmt.Errorf("call: %w", llm.HideURLs(wrapped)).Error()
	if strings.Contains(got, "PATHTOKEN") || strings.Contains(got, "QUERYTOKEN") || !strings.Contains(got, `"http://`+addr+`"`) {
		t.Errorf("HideURLs: %q, want the URL shown as its origin only", got)
	}
	if _, ok := errors.AsType[*url.Error](wrapped); !ok {
		t.Errorf("HideURLs lost the *url.Error")
	}
	if llm.HideURLs(nil) != nil {
		t.Errorf("HideURLs(nil) != nil")
	}
}

// FuzzRedact checks that a redacted text never contains a form of the key
// (see keyForms), whatever the key, the text and where a form of the key
// is put in it.
func FuzzRedact(f *testing.F) {
	f.Add("sk-test-secret-0123456789", "error: invalid key ", " (request 1)", uint8(0))
	f.Add("sk-ant-api03-AbC+dEf/GhI=jKl", "Authorization: Basic ", "", uint8(3))
	f.Add("TED]abcdefg", "[REDACTED]", "abcdefg", uint8(1))
	f.Add("abcdefgh", "abcdefg", "habcdefgh", uint8(7))
	f.Fuzz(func(t *testing.T, key, before, after string, pick uint8) {
		if len(key) < llm.MinRedactLen {
			return // redacted verbatim only, by design
		}
		forms := keyForms(key)
		names := make([]string, 0, len(forms))
		for name := range forms {
			names = append(names, name)
		}
		slices.Sort(names) // map order is random: pick by sorted name
		text := before + forms[names[int(pick)%len(names)]] + after
		got := llm.Secret(key).Redact(text)
		if what := leaked(got, key); what != "" {
			t.Errorf("Redact(%q) with key %q = %q: shows the key's %s form", text, key, got, what)
		}
	})
}
