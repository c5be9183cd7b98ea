package main

import (
	"errors"
	"fmt"
	"strings"
)

// maxConfigBytes bounds the plugin configuration, checked from the size
// Envoy passes to proxy_on_configure before the bytes are copied into the
// VM. 16 MiB is far above what Istio can deliver (a WasmPlugin is a
// Kubernetes object, and etcd limits a request to 1.5 MiB) and leaves room
// for inline topologies of about 100,000 endpoints.
const maxConfigBytes = 16 << 20

// checkConfigSize fails for a configuration over maxConfigBytes.
func checkConfigSize(n int) error {
	if n > maxConfigBytes {
		return fmt.Errorf("%w: %d bytes is over the limit of %d bytes; give the tree through \"tree\" (the agent) instead of an inline topology", errConfig, n, maxConfigBytes)
	}
	return nil
}

// Allowed ranges of the numeric fields, checked after defaults are filled.
const (
	minRefreshMS, maxRefreshMS = 10, 3_600_000
	minTimeoutMS, maxTimeoutMS = 1, 60_000
)

func checkRange(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s %d: must be %d..%d", name, v, lo, hi)
	}
	return nil
}

// forbiddenHeaders may not carry the chosen endpoint: hop-by-hop fields
// (RFC 9110 section 7.6.1, and proxy-connection), host and content-length,
// which frames the body. Envoy's header mutation rules refuse, by default,
// changes to the routing headers (host, :authority, :method, :scheme) and
// to x-envoy-* headers, and to every ':' header with disallow_system
// (source/extensions/filters/common/mutation_rules/mutation_rules.cc,
// Checker::isAllowed); loctree refuses all of them.
var forbiddenHeaders = map[string]bool{
	"connection": true, "proxy-connection": true, "keep-alive": true, "te": true,
	"transfer-encoding": true, "upgrade": true, "trailer": true,
	"host": true, "content-length": true,
}

// checkHeaderName accepts a lowercase field name made of RFC 9110 token
// characters (section 5.1: tchar) that is not forbidden. A pseudo-header
// (":path") fails the token rule, as do spaces, CR and LF.
func checkHeaderName(h string) error {
	if h == "" {
		return errors.New("header: empty name")
	}
	for i := 0; i < len(h); i++ {
		if !isTchar(h[i]) {
			return fmt.Errorf("header %q: byte %q is not allowed in a field name (RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~); pseudo-headers cannot be set", h, h[i])
		}
	}
	if forbiddenHeaders[h] || strings.HasPrefix(h, "x-envoy-") {
		return fmt.Errorf("header %q: a hop-by-hop, routing, framing or x-envoy- header cannot carry the endpoint; use e.g. %s", h, defaultHeader)
	}
	return nil
}

func isTchar(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
