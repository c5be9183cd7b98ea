package wasmproxy

import (
	"encoding/base64"
	"errors"
	"net/netip"
	"testing"
)

func TestTarget(t *testing.T) {
	allowed := netip.MustParseAddrPort("127.0.2.1:9080")
	p := &Proxy{Header: "x-gateway-destination-endpoint", Allowed: func(ap netip.AddrPort) bool { return ap == allowed }}
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"127.0.2.1:9080", true},
		{"127.0.2.1:9080,127.0.2.2:9080", true}, // fallbacks follow the first
		{base64.StdEncoding.EncodeToString([]byte("127.0.2.1:9080")), true},
		{"127.0.2.2:9080", false}, // not in the tree
		{"127.0.2.2:9080,127.0.2.1:9080", false},
		{"", false},
		{"reviews:9080", false},
		{"bm90LWFuLWFkZHJlc3M=", false},
	} {
		_, err := p.target(c.header)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, errBadGateway)) {
			t.Errorf("target(%q): err %v, want ok=%v", c.header, err, c.ok)
		}
	}
}

func FuzzTarget(f *testing.F) {
	f.Add("127.0.2.1:9080,127.0.2.2:9080")
	f.Add("[::1]:80")
	p := &Proxy{Header: "h", Allowed: func(netip.AddrPort) bool { return true }}
	f.Fuzz(func(t *testing.T, v string) {
		if ap, err := p.target(v); err == nil && !ap.IsValid() {
			t.Fatalf("accepted invalid address from %q", v)
		}
	})
}
