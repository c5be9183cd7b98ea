package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
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

// TestForwardEndpointDown: a chosen endpoint that refuses the connection
// is reported as such, naming it, not as "no allowed endpoint".
func TestForwardEndpointDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := &Proxy{Header: "x-gateway-destination-endpoint", Allowed: func(netip.AddrPort) bool { return true }}
	req := &host.Request{Headers: host.Headers{{":method", "GET"}, {":path", "/"}, {":authority", "reviews"}, {"x-gateway-destination-endpoint", down}}}
	_, err = p.forward(context.Background(), req)
	if !errors.Is(err, errBadGateway) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), down) ||
		strings.Contains(err.Error(), "no allowed endpoint") {
		t.Fatalf("forward to a closed port: %v, want a bad gateway naming %s and the refused connection", err, down)
	}
}
