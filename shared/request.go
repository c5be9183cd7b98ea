package shared

import (
	"strings"
	"unsafe"
)

// How a proxied request names its service: one rule, used by the filter on
// every request and by `loctree wasm run` to explain what the filter did.

// RequestNames are the names a request's service is looked up by, in
// order; second is "" when there is no second. From an Istio cluster name
// "DIRECTION|PORT|SUBSET|HOST" (Envoy's xds.cluster_name; istio/istio
// pilot/pkg/model/service.go BuildSubsetKey) they are "HOST:PORT", then
// HOST; any other cluster name is taken by its last '|' field. From an
// :authority they are the authority as given ("host:port"), then its host
// without the port. The Kubernetes source names one tree service per
// Service port and every port answers to "HOST:PORT", so a port reaches
// its own endpoints; the bare HOST is the first TCP port's (or a
// topology's service without ports). scratch is reused to build
// "HOST:PORT"; first may point into it, so it is valid until scratch is
// used again.
func RequestNames(key string, fromCluster bool, scratch *[]byte) (first, second string) {
	if !fromCluster {
		if h := HostOf(key); h != key {
			return key, h
		}
		return key, ""
	}
	host, port, ok := splitClusterName(key)
	if !ok {
		return ClusterHost(key), ""
	}
	*scratch = append(append(append((*scratch)[:0], host...), ':'), port...)
	return unsafe.String(unsafe.SliceData(*scratch), len(*scratch)), host
}

// ServiceForRequest is the service a request names (RequestNames), with
// no allocation.
func (t *Tree) ServiceForRequest(key string, fromCluster bool, scratch *[]byte) (*Service, bool) {
	first, second := RequestNames(key, fromCluster, scratch)
	if s, ok := t.Service(first); ok {
		return s, true
	}
	if second == "" {
		return nil, false
	}
	return t.Service(second)
}

// ClusterHost is the host of a cluster name: its last '|' field (the
// whole name when it has none).
func ClusterHost(cluster string) string {
	if i := strings.LastIndexByte(cluster, '|'); i >= 0 {
		return cluster[i+1:]
	}
	return cluster
}

// HostOf is an :authority's host without its port ("[::1]:80" → "::1";
// an authority with more than one ':' and no brackets is a bare IPv6
// address, kept whole).
func HostOf(authority string) string {
	if strings.HasPrefix(authority, "[") {
		if i := strings.IndexByte(authority, ']'); i > 0 {
			return authority[1:i]
		}
	}
	if strings.Count(authority, ":") == 1 {
		return authority[:strings.IndexByte(authority, ':')]
	}
	return authority
}

// splitClusterName splits an Istio cluster name
// "DIRECTION|PORT|SUBSET|HOST" into HOST and PORT; ok is false unless it
// has four fields, a decimal PORT and a HOST.
func splitClusterName(c string) (host, port string, ok bool) {
	_, rest, ok1 := strings.Cut(c, "|")
	port, rest, ok2 := strings.Cut(rest, "|")
	_, host, ok3 := strings.Cut(rest, "|")
	if !ok1 || !ok2 || !ok3 || host == "" || strings.IndexByte(host, '|') >= 0 || !decimal(port) {
		return "", "", false
	}
	return host, port, true
}

func decimal(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
