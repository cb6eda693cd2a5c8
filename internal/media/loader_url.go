package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"

	"github.com/batchagent/batchagent/internal/netguard"
)

// parseURL parses an http(s) reference and checks it may be fetched or
// passed on.
func (l *Loader) parseURL(ref string) (*url.URL, error) {
	u, err := url.Parse(ref)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	if err := l.checkURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkURL reports why u may not be fetched or passed on: only https
// (http too with AllowPrivate), hosts in Fetch (any host when Fetch is
// empty and URLs are passed on), no address netguard refuses.
func (l *Loader) checkURL(u *url.URL) error {
	if addr, err := netip.ParseAddr(u.Hostname()); err == nil && !l.allowPrivate {
		if kind := netguard.Refused(addr); kind != "" {
			return fmt.Errorf("refused: %w", &netguard.AddressError{Addr: addr.Unmap(), Kind: kind})
		}
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && l.allowPrivate) {
		return fmt.Errorf("scheme %q is refused; media URLs must be https", u.Scheme)
	}
	if l.hosts.Len() == 0 {
		if !l.passURLs {
			return fmt.Errorf("host %q is not allowed: no host is (media.fetch is empty)", u.Host)
		}
		if u.Hostname() == "" {
			return errors.New("the URL has no host")
		}
		if u.User != nil {
			return errors.New("URLs with user information (user:password@) are not allowed")
		}
		return nil
	}
	if err := netguard.CheckURL(u, l.hosts, l.allowPrivate); err != nil {
		var ae *netguard.AddressError
		if errors.As(err, &ae) {
			return fmt.Errorf("refused: %w", err)
		}
		return fmt.Errorf("%w (media.fetch)", err)
	}
	return nil
}

// fetch GETs u through the guarded client and hands read the body,
// capped at maxBytes. It returns the media type the response declares
// where it is one Sniff knows, or "".
func (l *Loader) fetch(ctx context.Context, u *url.URL, read func(io.Reader) error) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "batchagent-media")
	// current is the URL being fetched: u, or the latest redirect's
	// target. The client calls CheckRedirect on this goroutine.
	current := u
	c := *l.client
	c.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return &redirectError{fmt.Sprintf("stopped after %d redirects: the next was to %s", maxRedirects, next.URL.Redacted())}
		}
		if err := l.checkURL(next.URL); err != nil {
			return &redirectError{fmt.Sprintf("redirected to %s: %v", next.URL.Redacted(), err)}
		}
		current = next.URL
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fetchError(current, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %s", resp.Status)
	}
	if resp.ContentLength > l.maxBytes {
		return "", l.overCap(resp.ContentLength)
	}
	cr := &countingReader{r: io.LimitReader(resp.Body, l.maxBytes+1)}
	if err := read(cr); err != nil {
		return "", fetchError(current, err)
	}
	if cr.n > l.maxBytes {
		return "", fmt.Errorf("body over the %s cap (media.max_bytes)", sizeName(l.maxBytes))
	}
	declared := Canonical(resp.Header.Get("Content-Type"))
	if !known(declared) {
		declared = ""
	}
	return declared, nil
}

// redirectError is a redirect refused by the loader's CheckRedirect. It
// does not unwrap: the address it may name is the target's, not the
// URL's that fetchError describes.
type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

// fetchError says why a fetch of u (the URL asked for, or the redirect
// being followed) failed, naming a refused address.
func fetchError(u *url.URL, err error) error {
	var ae *netguard.AddressError
	if errors.As(err, &ae) {
		if u.Hostname() == ae.Addr.String() {
			return fmt.Errorf("refused: %w", ae)
		}
		return fmt.Errorf("refused: host %q resolves to %s, %s address; %s", u.Hostname(), ae.Addr, netguard.Article(ae.Kind), netguard.RefusedNote)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // "Get URL: " would repeat the URL
	}
	return err
}
