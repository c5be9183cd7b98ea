package main

import (
	"encoding/binary"

	"github.com/loctree/loctree/shared"
)

// treeState is one installed tree plus this VM's per-tree picking state.
type treeState struct {
	tree     *shared.Tree
	labels   [][]uint64 // per service index: the proxy's label per scope
	inflight []int32    // per absolute endpoint: requests in flight (this VM)
	rr       []uint64   // per service index: round-robin cursor
	addrs    []string   // per absolute endpoint: "ip:port", filled lazily
	etag     string     // the tree server's ETag for this tree
}

func newTreeState(t *shared.Tree, loc *sourceLocality) *treeState {
	svcs := t.Services()
	st := &treeState{
		tree:     t,
		labels:   make([][]uint64, len(svcs)),
		inflight: make([]int32, t.NumEndpoints()),
		rr:       make([]uint64, len(svcs)),
		addrs:    make([]string, t.NumEndpoints()),
	}
	for i := range svcs {
		for _, scope := range svcs[i].Scopes {
			st.labels[i] = append(st.labels[i], shared.Label(loc.value(scope)))
		}
	}
	return st
}

func (st *treeState) generation() uint64 {
	if st == nil {
		return 0
	}
	return st.tree.Generation()
}

func (st *treeState) addr(i uint32) string {
	if st.addrs[i] == "" {
		st.addrs[i] = st.tree.Endpoint(i).Addr.String()
	}
	return st.addrs[i]
}

// blobGeneration reads the generation field of an encoded tree header
// without decoding the rest; 0 if the blob is too short.
func blobGeneration(b []byte) uint64 {
	if len(b) < shared.HeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint64(b[16:])
}
