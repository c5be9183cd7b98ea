package main

import (
	"strings"
	"unsafe"

	"github.com/loctree/loctree/shared"
)

// svcCache is the last service lookup, found or not (most requests of a
// proxy go to the same few services). The tree never changes under a
// treeState, so an entry is valid while tree is the current one.
type svcCache struct {
	tree        *treeState
	key         string // the cluster name or authority, copied
	fromCluster bool
	svc         *shared.Service // nil: the tree has no such service
}

// service finds the service a request names by key (see resolveService),
// answering from the cache when the tree and key are the last ones.
func (p *pluginContext) service(st *treeState, key string, fromCluster bool) *shared.Service {
	c := &p.last
	if c.tree == st && c.fromCluster == fromCluster && c.key == key {
		return c.svc
	}
	svc := resolveService(st.tree, key, fromCluster, &p.scratch)
	*c = svcCache{tree: st, key: strings.Clone(key), fromCluster: fromCluster, svc: svc}
	return svc
}

// resolveService finds the tree service a request names. From an Istio
// cluster name "outbound|PORT|SUBSET|HOST" it tries "HOST:PORT", then HOST
// (any other cluster name is taken whole); from an authority it tries the
// authority as given ("host:port"), then the host without its port. The
// Kubernetes source names one tree service per Service port and every port
// answers to "HOST:PORT", so a port reaches its own endpoints; the bare HOST
// is the first TCP port's (or a topology's service without ports). scratch
// is reused to build "HOST:PORT".
func resolveService(t *shared.Tree, key string, fromCluster bool, scratch *[]byte) *shared.Service {
	first, second := key, ""
	if fromCluster {
		host, port, ok := splitClusterName(key)
		switch {
		case ok:
			*scratch = append(append(append((*scratch)[:0], host...), ':'), port...)
			// The tree only reads the key during the lookup.
			first, second = unsafe.String(unsafe.SliceData(*scratch), len(*scratch)), host
		default:
			first = clusterHost(key)
		}
	} else if h := hostOf(key); h != key {
		second = h
	}
	if svc, ok := t.Service(first); ok {
		return svc
	}
	if second == "" {
		return nil
	}
	svc, _ := t.Service(second)
	return svc
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
