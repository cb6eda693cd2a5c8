package httptool

import (
	"net/netip"
	"net/url"

	"github.com/batchagent/batchagent/internal/netguard"
)

// RefusedAddressKind exposes netguard.Refused to tests in package httptool_test.
func RefusedAddressKind(a netip.Addr) string { return netguard.Refused(a) }

// CheckURL reports why the http_get tool built from cfg would refuse
// to fetch rawURL before connecting, or nil: it lets tests match host names
// that do not resolve without touching the network.
func CheckURL(cfg Config, rawURL string) error {
	t, err := Get(cfg)
	if err != nil {
		return err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	return t.(*get).checkURL(u)
}
