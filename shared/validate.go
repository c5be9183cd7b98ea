package shared

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// checkText rejects a name, host, scope key or scope value that is not
// printable UTF-8: control characters (C0, DEL, C1) would reach terminals,
// logs and headers as they are. Kubernetes rejects them too: a label value
// may hold only [A-Za-z0-9._-] (k8s.io/apimachinery
// pkg/util/validation/validation.go, IsValidLabelValue); loctree is more
// permissive (hosts, '/', spaces and non-ASCII letters are fine) but never
// accepts a control character.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%q contains control character %U; use printable text", s, r)
		}
	}
	return nil
}

// broadcast4 is the limited broadcast address, 255.255.255.255.
var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// checkUnicast rejects an address no connection can be sent to as one
// endpoint: unspecified (0.0.0.0, ::), multicast and the limited broadcast
// address. Kubernetes rejects unspecified and link-local multicast endpoint
// IPs (pkg/apis/core/validation/validation.go, ValidateEndpointIP); it also
// rejects loopback, which loctree keeps because its tests run on
// 127.0.0.0/8. a is already unmapped.
func checkUnicast(a netip.Addr) error {
	switch {
	case a.IsUnspecified():
		return fmt.Errorf("%s is the unspecified address; want a unicast address", a)
	case a.IsMulticast():
		return fmt.Errorf("%s is a multicast address; want a unicast address", a)
	case a == broadcast4:
		return fmt.Errorf("%s is the broadcast address; want a unicast address", a)
	}
	return nil
}

// vipOwners maps each service VIP:port to the service that has it.
type vipOwners map[netip.AddrPort]string

// claim records s's VIP, or fails naming both services when another
// service has it already. IPv4-mapped IPv6 VIPs are unmapped by parseAddr,
// so 127.0.0.1:80 and [::ffff:127.0.0.1]:80 are the same frontend.
func (o vipOwners) claim(s *builtService) error {
	if !s.vip.IsValid() {
		return nil
	}
	if prev, ok := o[s.vip]; ok {
		return invalid("services %q and %q have the same vip %s; give each service its own vip:port", prev, s.name, s.vip)
	}
	o[s.vip] = s.name
	return nil
}

// CheckFailoverRule refuses the failover rules Istio refuses (Build and
// the Kubernetes source both call it), with Istio's
// reason (istio/istio pkg/config/validation/agent/validation.go at
// 86c9f01f, the failover loop of ValidateLocalityLbSetting): the same
// region twice, a zone or subzone ("r1/z1": applyLocalityFailover compares
// a source's region with from, so it never matches), a '*' wildcard
// (likewise). Istio lists every reason of a rule; this returns the first,
// in Istio's order, and adds what to write instead.
func CheckFailoverRule(r FailoverSpec) error {
	switch {
	case r.From == r.To:
		return errors.New("locality lb failover settings must specify different regions (Istio's validation); name another region in to")
	case strings.Contains(r.From, "/") || strings.Contains(r.To, "/"):
		return errors.New("locality lb failover only specify region (Istio's validation); write the region alone, \"r1\" for \"r1/z1\"")
	case strings.Contains(r.From, "*") || strings.Contains(r.To, "*"):
		return errors.New("locality lb failover region should not contain '*' wildcard (Istio's validation); write one rule per region")
	}
	return nil
}
