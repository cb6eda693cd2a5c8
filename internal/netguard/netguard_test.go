package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/netguard"
)

func TestRefused(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.1.2.3": "private", "192.168.0.1": "private", "fd00::1": "private",
		"169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "100.64.0.1": "shared (CGNAT)", "239.1.2.3": "multicast",
		"240.0.0.1": "reserved", "64:ff9b::7f00:1": "loopback",
		"93.184.216.34": "", "2606:4700::1111": "",
	} {
		if got := netguard.Refused(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Refused(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestParseHosts(t *testing.T) {
	t.Parallel()
	h, err := netguard.ParseHosts([]string{"cdn.example.com", "*.img.example.com", "10.0.0.5:8080", "[::1]"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		host, port string
		want       bool
	}{
		{"cdn.example.com", "443", true},
		{"a.img.example.com", "443", true},
		{"img.example.com", "443", false},
		{"example.com", "443", false},
		{"10.0.0.5", "8080", true},
		{"10.0.0.5", "80", false},
		{"::1", "443", true},
	} {
		addr, _ := netip.ParseAddr(tt.host)
		if got := h.Allows(tt.host, addr, tt.port); got != tt.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
	if got, want := h.String(), "cdn.example.com, *.img.example.com, 10.0.0.5:8080, [::1]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	_, err = netguard.ParseHosts([]string{"ok.example.com", "https://bad.example.com/"})
	var ee *netguard.EntryError
	if !errors.As(err, &ee) || ee.Index != 1 || ee.Entry != "https://bad.example.com/" || !strings.Contains(err.Error(), "not a URL") {
		t.Errorf("ParseHosts(a URL) = %v, want an EntryError for entry 1", err)
	}
	for _, bad := range []string{"", "*", "*.", "a..b", "[::1", "10.0.0.1:0", "host:99999", "fe80::1%eth0"} {
		if _, err := netguard.ParseHosts([]string{bad}); err == nil {
			t.Errorf("ParseHosts(%q) = nil error, want one", bad)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	h, err := netguard.ParseHosts([]string{"cdn.example.com", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		"https://cdn.example.com/a.png":  "",
		"https://CDN.example.com./a.png": "",
		"cdn.example.com/a.png":          "not an absolute URL",
		"ftp://cdn.example.com/a":        `scheme "ftp" is not allowed`,
		"https://u:p@cdn.example.com/":   "user information",
		"https://other.example.com/":     `host "other.example.com" is not allowed; allowed hosts: cdn.example.com, 127.0.0.1`,
		"https://127.0.0.1/":             "127.0.0.1 is a loopback address; " + netguard.RefusedNote,
		"https://ex\u00e4mple.com/":      "not ASCII",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		err = netguard.CheckURL(u, h, false)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckURL(%s) = %v, want nil", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckURL(%s) = %v, want %q", raw, err, want)
		}
	}
	u, _ := url.Parse("https://127.0.0.1/")
	if err := netguard.CheckURL(u, h, true); err != nil {
		t.Errorf("CheckURL(loopback, allowPrivate) = %v, want nil", err)
	}
	if err := netguard.CheckURL(u, netguard.Hosts{}, true); err == nil || !strings.Contains(err.Error(), "no host is allowed") {
		t.Errorf("CheckURL(zero Hosts) = %v, want no host allowed", err)
	}
}

// TestControl dials a loopback server through a guarded dialer: the
// connection is refused with an AddressError, whatever name was dialed.
func TestControl(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	d := &net.Dialer{Control: netguard.Control}
	for _, addr := range []string{srv.Listener.Addr().String(), net.JoinHostPort("localhost", port)} {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s through Control succeeded", addr)
		}
		var ae *netguard.AddressError
		if !errors.As(err, &ae) || ae.Kind != "loopback" {
			t.Errorf("dial %s = %v, want a loopback AddressError", addr, err)
		}
	}
}
