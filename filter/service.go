package main

import (
	"strings"

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
	counts      *serviceCounts  // svc's counts, once asked for
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

// resolveService finds the tree service a request names, by the rule
// shared.RequestNames states (also what `loctree wasm run` explains).
func resolveService(t *shared.Tree, key string, fromCluster bool, scratch *[]byte) *shared.Service {
	svc, _ := t.ServiceForRequest(key, fromCluster, scratch)
	return svc
}

// counts returns svc's per-request counts, remembered beside the last
// service lookup so that a request does not look its name up in a map.
func (p *pluginContext) counts(svc *shared.Service) *serviceCounts {
	c := &p.last
	if c.svc != svc {
		return p.m.service(svc.Name())
	}
	if c.counts == nil {
		c.counts = p.m.service(svc.Name())
	}
	return c.counts
}
