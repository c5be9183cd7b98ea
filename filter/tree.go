package main

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"

	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// treeState is one installed tree plus this VM's per-tree picking state.
type treeState struct {
	tree    *shared.Tree
	labels  [][]uint64      // per service index: the proxy's label per scope
	ranges  []cachedRange   // per service index: the proxy's candidates, once looked up
	loads   []*shared.Loads // per service index: the proxy's priority loads (nil: no spillover)
	traffic []svcTraffic    // per service index: its endpoints' destinations (traffic.go)
	picker  *shared.Picker  // this VM's policy state (round robin, in-flight counts)
	addrs   *addrCache      // "ip:port" of recently picked endpoints
	etag    string          // the tree server's ETag for this tree
	rng     uint64          // wyrand state
}

// addrCacheSize is the number of formatted addresses a VM keeps: a
// direct-mapped cache by endpoint index, so its memory does not grow with
// the tree (a proxy's picks go to the few endpoints near it).
const addrCacheSize = 256

type addrCache [addrCacheSize]struct {
	ep   uint32 // endpoint index + 1; 0: empty
	addr string
}

// randN returns a uniform number in [0, n) (wyrand and Lemire's reduction:
// no call into the runtime's generator on the hot path).
func (st *treeState) randN(n uint32) uint32 {
	st.rng += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(st.rng, st.rng^0xe7037ed1a0b428db)
	return uint32((uint64(uint32(hi^lo)) * uint64(n)) >> 32)
}

func newTreeState(t *shared.Tree, loc *sourceLocality) *treeState {
	svcs := t.Services()
	st := &treeState{
		tree:    t,
		labels:  make([][]uint64, len(svcs)),
		loads:   make([]*shared.Loads, len(svcs)),
		ranges:  make([]cachedRange, len(svcs)),
		traffic: make([]svcTraffic, len(svcs)),
		picker:  shared.NewPicker(t, shared.PickerOptions{Seed: rand.Uint64() | 1}),
		addrs:   new(addrCache),
		rng:     rand.Uint64(),
	}
	for i := range svcs {
		for _, scope := range svcs[i].Scopes() {
			st.labels[i] = append(st.labels[i], shared.Label(loc.value(scope)))
		}
		if svcs[i].OverprovisioningFactor() != 0 {
			st.loads[i] = new(shared.Loads)
			svcs[i].LoadsLabels(st.labels[i], st.loads[i])
		}
	}
	return st
}

// cachedRange is a service's lookup for the proxy's locality.
type cachedRange struct {
	r  shared.Range
	ok bool
}

// lookup is svc's candidate range for the proxy's locality. The tree and
// the locality never change under a treeState, so it is looked up once.
func (st *treeState) lookup(svc *shared.Service) shared.Range {
	c := &st.ranges[svc.Index()]
	if !c.ok {
		c.r, c.ok = svc.LookupLabels(st.labels[svc.Index()]), true
	}
	return c.r
}

func (st *treeState) generation() uint64 {
	if st == nil {
		return 0
	}
	return st.tree.Generation()
}

// addr is endpoint i's "ip:port"; it allocates only when i is not cached.
func (st *treeState) addr(i uint32) string {
	c := &st.addrs[i%addrCacheSize]
	if c.ep != i+1 {
		c.ep, c.addr = i+1, st.tree.Endpoint(i).Addr.String()
	}
	return c.addr
}

// version identifies a tree's content, its generation and its checksum
// (agents on different nodes number generations independently, so the
// generation alone could name two different trees), and its format
// version, so that a VM can tell a tree it cannot read before it reads it.
type version [14]byte

func (st *treeState) version() version {
	if st == nil {
		return version{}
	}
	return blobVersion(st.tree.Bytes())
}

// blobVersion reads the generation, checksum and format version fields of
// an encoded tree header without decoding the rest; zero if the blob is too
// short.
func blobVersion(b []byte) version {
	var v version
	if len(b) >= wire.HeaderSize {
		copy(v[:8], b[wire.HGeneration:wire.HGeneration+8])
		copy(v[8:12], b[wire.HChecksum:wire.HChecksum+4])
		copy(v[12:], b[wire.HVersion:wire.HVersion+2])
	}
	return v
}

// format is the tree format version v names.
func (v version) format() uint16 { return binary.LittleEndian.Uint16(v[12:]) }
