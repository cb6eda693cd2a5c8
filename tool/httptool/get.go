package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/internal/netguard"
	"github.com/batchagent/batchagent/tool"
)

// Defaults for [Config].
const (
	// DefaultMaxBytes is the default [Config.MaxBytes]: 1 KiB less than
	// [tool.DefaultMaxResultBytes], which leaves room for the status and
	// Content-Type lines and the truncation marker, so that a [tool.Pool]
	// with the default [tool.PoolConfig.MaxResultBytes] returns the result
	// of http_get as the tool made it.
	DefaultMaxBytes = tool.DefaultMaxResultBytes - 1<<10
	// DefaultTimeout is the default [Config.Timeout].
	DefaultTimeout = 10 * time.Second
	// DefaultMaxRedirects is the default [Config.MaxRedirects].
	DefaultMaxRedirects = 5
)

// sniffBytes is how much of a body is searched for a NUL byte, and given
// to [http.DetectContentType], to tell binary bodies from text.
const sniffBytes = 8 << 10

// maxHeaderBytes bounds the response headers http_get accepts.
const maxHeaderBytes = 64 << 10

// Config confines the http_get tool. The zero value is valid and allows
// nothing: every call is refused.
type Config struct {
	// AllowHosts are the hosts the tool may fetch from, also after a
	// redirect. An entry is a host name ("api.example.com"), a pattern
	// "*.example.com" matching every host name below example.com but not
	// example.com itself, or an IP address ("127.0.0.1", "::1"); each may
	// carry a port ("example.com:8080", "[::1]:8080"), without which any port
	// matches. Names are compared case-insensitively; IP addresses match
	// only IP entries. International names must be written in their
	// "xn--" form. Zero means no host is allowed.
	AllowHosts []string
	// AllowPrivate lets the tool connect to loopback, private (RFC 1918,
	// fc00::/7), link-local (169.254.0.0/16, which holds the cloud metadata
	// address 169.254.169.254, and fe80::/10), unspecified, shared (CGNAT,
	// 100.64.0.0/10), multicast and reserved addresses. Zero means they are
	// refused, whether written in the URL or the result of resolving an
	// allowed host name: the check is made on the address actually
	// connected to, which defeats DNS rebinding.
	AllowPrivate bool
	// MaxBytes is the most body bytes a call returns; longer bodies are cut
	// and followed by the line "[truncated at MaxBytes bytes]". Defaults to
	// DefaultMaxBytes; negative is an error. A [tool.Pool] also cuts
	// every result to [tool.PoolConfig.MaxResultBytes]: raise both together.
	MaxBytes int64
	// Timeout bounds a whole call: connecting, redirects and reading the
	// body. Defaults to DefaultTimeout; negative is an error.
	Timeout time.Duration
	// MaxRedirects is the most redirects a call follows; each redirect's
	// target must pass the same checks as the URL asked for. Defaults to
	// DefaultMaxRedirects; negative means redirects are not followed
	// (a redirect is then an error naming its target).
	MaxRedirects int
	// Cacheable marks the tool cacheable ([tool.Spec.Cacheable]): set it
	// when the pages do not change while a job runs.
	Cacheable bool
}

// get is the http_get tool.
type get struct {
	spec         tool.Spec
	hosts        netguard.Hosts
	allowPrivate bool
	maxBytes     int64
	timeout      time.Duration
	maxRedirects int
	transport    *http.Transport
}

// Get returns the http_get tool, which fetches a URL with an HTTP GET.
// Its arguments are {"url": string}, an absolute http or https URL whose host
// is allowed by AllowHosts. It is safe for concurrent use.
//
// The result is "HTTP STATUS\nContent-Type: TYPE\n\nBODY"; statuses other
// than 2xx are results, not errors. Bodies are returned as text: binary
// content types (images, archives, PDF …) are refused without reading the
// body, a body without a type or of type application/octet-stream is
// refused unless it looks like text, and any body with a NUL byte in its
// first 8 KiB is refused. Bodies over MaxBytes are cut, on a UTF-8 boundary,
// and followed by "\n[truncated at N bytes]".
//
// Refused, with an error text meant for the model: URLs that are not
// absolute http or https URLs, URLs with user information, hosts not on the
// allowlist, addresses ruled out by AllowPrivate, redirects to such URLs or
// beyond MaxRedirects, and calls that run past Timeout. Requests carry no
// cookies or credentials and go directly to the host, never through a proxy
// from the environment. Each call uses its own connection, so no connection
// or goroutine outlives a call.
//
// Get fails if an AllowHosts entry is malformed, or MaxBytes or Timeout
// is negative.
func Get(cfg Config) (tool.Tool, error) {
	switch {
	case cfg.MaxBytes < 0:
		return nil, fmt.Errorf("tool: http_get: negative MaxBytes %d", cfg.MaxBytes)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("tool: http_get: negative Timeout %v", cfg.Timeout)
	case cfg.MaxBytes == 0:
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxRedirects == 0:
		cfg.MaxRedirects = DefaultMaxRedirects
	case cfg.MaxRedirects < 0:
		cfg.MaxRedirects = 0
	}
	t := &get{
		allowPrivate: cfg.AllowPrivate,
		maxBytes:     cfg.MaxBytes,
		timeout:      cfg.Timeout,
		maxRedirects: cfg.MaxRedirects,
	}
	hosts, err := netguard.ParseHosts(cfg.AllowHosts)
	if err != nil {
		var ee *netguard.EntryError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("tool: http_get: AllowHosts[%d] %q: %w", ee.Index, ee.Entry, ee.Err)
		}
		return nil, fmt.Errorf("tool: http_get: AllowHosts: %w", err)
	}
	t.hosts = hosts

	dialer := &net.Dialer{}
	if !cfg.AllowPrivate {
		dialer.Control = netguard.Control
	}
	t.transport = &http.Transport{
		Proxy:                  nil, // a proxy would be the address checked, not the host
		DialContext:            dialer.DialContext,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}

	allowed := "No host is allowed at present, so every call fails."
	if len(cfg.AllowHosts) > 0 {
		allowed = "Only these hosts are allowed: " + t.hosts.String() + "."
	}
	t.spec = tool.Spec{
		Name: "http_get",
		Description: fmt.Sprintf("Fetch a web page or API response with an HTTP GET and return its status, content type and body as text. "+
			"Give an absolute http or https URL. %s "+
			"Redirects are followed only to allowed hosts. Binary content such as images is refused; bodies over %d bytes are cut.",
			allowed, cfg.MaxBytes),
		Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string",` +
			`"description":"Absolute http or https URL to fetch, for example \"https://example.com/page\"."}},` +
			`"required":["url"],"additionalProperties":false}`),
		Cacheable: cfg.Cacheable,
	}
	return t, nil
}

func (t *get) Spec() tool.Spec { return t.spec }

// errTimeout is the cause of a call's context when Timeout runs out.
var errTimeout = errors.New("http_get timeout")

func (t *get) Call(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		URL *string `json:"url"`
	}
	if err := tool.DecodeArgs(args, &a, `{"url": "<http or https URL>"}`); err != nil {
		return "", err
	}
	if a.URL == nil {
		return "", fmt.Errorf(`%w: missing required argument "url"`, tool.ErrBadArguments)
	}
	raw := *a.URL
	if raw == "" {
		return "", errors.New(`url is empty; give an absolute http or https URL, for example "https://example.com/"`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("url %q: %v", raw, err)
	}
	if err := t.checkURL(u); err != nil {
		return "", fmt.Errorf("url %q: %w", raw, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}

	rctx, cancel := context.WithTimeoutCause(ctx, t.timeout, errTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("url %q: %v", raw, err)
	}
	req.Header.Set("User-Agent", "batchagent-http_get")
	req.Header.Set("Accept", "text/*, application/json, application/xml, */*;q=0.1")
	// current is the URL being fetched: u, or the target of the latest
	// redirect followed. The client calls CheckRedirect on this goroutine.
	current := u
	client := &http.Client{
		Transport: t.transport,
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			target := next.URL.String()
			switch {
			case len(via) > t.maxRedirects && t.maxRedirects == 0:
				return &redirectError{fmt.Errorf("redirected to %q: redirects are not followed", target)}
			case len(via) > t.maxRedirects:
				return &redirectError{fmt.Errorf("stopped after %d redirects: the next was to %q", t.maxRedirects, target)}
			}
			if err := t.checkURL(next.URL); err != nil {
				return &redirectError{fmt.Errorf("redirected to %q: %w", target, err)}
			}
			current = next.URL
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", t.requestError(ctx, rctx, raw, u, current, err)
	}
	defer resp.Body.Close()

	contentType := resp.Header.Get("Content-Type")
	mediaType := parseMediaType(contentType)
	sniff := mediaType == "" || mediaType == "application/octet-stream" || mediaType == "binary/octet-stream"
	if !sniff && !textMediaType(mediaType) {
		return "", fmt.Errorf("url %q: binary content (%.100s)", raw, mediaType)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.maxBytes+1))
	if err != nil {
		return "", t.requestError(ctx, rctx, raw, u, current, err)
	}
	head := body[:min(len(body), sniffBytes)]
	if sniff {
		if sniffed := http.DetectContentType(head); !strings.HasPrefix(sniffed, "text/") {
			if mediaType == "" {
				return "", fmt.Errorf("url %q: binary content (no Content-Type; the body looks like %s)", raw, parseMediaType(sniffed))
			}
			return "", fmt.Errorf("url %q: binary content (%.100s)", raw, mediaType)
		}
	}
	if bytes.IndexByte(head, 0) >= 0 {
		label := mediaType
		if label == "" {
			label = "no Content-Type"
		}
		return "", fmt.Errorf("url %q: binary content (%s with NUL bytes)", raw, label)
	}

	var b strings.Builder
	b.Grow(len(body) + 100)
	fmt.Fprintf(&b, "HTTP %d", resp.StatusCode)
	if text := http.StatusText(resp.StatusCode); text != "" {
		b.WriteString(" " + text)
	}
	if contentType == "" {
		contentType = "(none)"
	}
	b.WriteString("\nContent-Type: " + strings.ToValidUTF8(contentType, "\uFFFD") + "\n\n")
	if int64(len(body)) > t.maxBytes {
		b.Write(body[:utf8Cut(body, int(t.maxBytes))])
		fmt.Fprintf(&b, "\n[truncated at %d bytes]", t.maxBytes)
	} else {
		b.Write(body)
	}
	return b.String(), nil
}

// checkURL reports why u may not be fetched, or nil. Its errors are meant for
// the model.
func (t *get) checkURL(u *url.URL) error {
	return netguard.CheckURL(u, t.hosts, t.allowPrivate)
}

// requestError turns a failed request into an error for the model. ctx is
// the caller's context, rctx the call's (with Timeout), u the URL asked for
// and current the URL that was being fetched.
func (t *get) requestError(ctx, rctx context.Context, raw string, u, current *url.URL, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("url %q: %w", raw, ctx.Err())
	}
	if errors.Is(context.Cause(rctx), errTimeout) {
		return fmt.Errorf("url %q: timed out after %v", raw, t.timeout)
	}
	redirected := ""
	if current != u {
		redirected = fmt.Sprintf("redirected to %q: ", current.String())
	}
	var ae *netguard.AddressError
	if errors.As(err, &ae) {
		host := current.Hostname()
		if host == ae.Addr.String() {
			return fmt.Errorf("url %q: %s%v", raw, redirected, ae)
		}
		return fmt.Errorf("url %q: %shost %q resolves to %s, %s address; %s", raw, redirected, host, ae.Addr, netguard.Article(ae.Kind), netguard.RefusedNote)
	}
	var re *redirectError
	if errors.As(err, &re) {
		return fmt.Errorf("url %q: %w", raw, re.err) // it names the target
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // "Get URL: " would repeat the URL
	}
	return fmt.Errorf("url %q: %s%v", raw, redirected, err)
}

// redirectError is a redirect refused by http_get's CheckRedirect.
type redirectError struct{ err error }

func (e *redirectError) Error() string { return e.err.Error() }

// parseMediaType returns the lower-case media type of a Content-Type value,
// without parameters, or "" for none.
func parseMediaType(contentType string) string {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// textMediaType reports whether a media type is text.
func textMediaType(mt string) bool {
	if strings.HasPrefix(mt, "text/") ||
		strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") || strings.HasSuffix(mt, "+yaml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-javascript",
		"application/ecmascript", "application/yaml", "application/x-yaml", "application/toml",
		"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-www-form-urlencoded",
		"application/graphql", "application/sql", "application/csv", "application/x-sh", "message/rfc822":
		return true
	}
	return false
}

// utf8Cut returns where to cut b so that b[:n] has at most limit bytes and
// splits no rune: limit if b[limit] starts a rune, or else the start of the
// rune that b[limit] continues, which may be 0. Where b is not UTF-8 (no
// rune starts in the utf8.UTFMax bytes up to b[limit]) it returns limit. b
// must be longer than limit, and limit not negative. It repeats the few
// lines package tool uses to cut results, rather than widen tool's API.
func utf8Cut(b []byte, limit int) int {
	for n := limit; n >= 0 && limit-n < utf8.UTFMax; n-- {
		if utf8.RuneStart(b[n]) {
			return n
		}
	}
	return limit
}
