package bpf

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/loctree/loctree/internal/testing/treetest"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// asRecords copies raw records into a slice of T the way the loader copies
// them into the maps: unchanged bytes.
func asRecords[T any](t *testing.T, raw []byte) []T {
	t.Helper()
	size := int(unsafe.Sizeof(*new(T)))
	if len(raw)%size != 0 {
		t.Fatalf("%d bytes is not a whole number of %d-byte records", len(raw), size)
	}
	out := make([]T, len(raw)/size)
	if len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(raw)), raw)
	}
	return out
}

// TestRecordsMatchShared proves that the node and endpoint records written by
// shared/ read back field for field through the C structs' Go types.
func TestRecordsMatchShared(t *testing.T) {
	if unsafe.Sizeof(Node{}) != wire.NodeRecordSize || unsafe.Sizeof(Endpoint{}) != wire.EndpointRecordSize {
		t.Fatalf("sizes %d/%d, shared %d/%d", unsafe.Sizeof(Node{}), unsafe.Sizeof(Endpoint{}), wire.NodeRecordSize, wire.EndpointRecordSize)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tree, err := shared.Build(treetest.Topology(rng, treetest.Options{Services: 20, IPv6: true}), shared.BuildOptions{Generation: 7})
	if err != nil {
		t.Fatal(err)
	}
	nodes := asRecords[Node](t, wire.Split(tree.Bytes()).Nodes)
	for i, n := range nodes {
		want := tree.Node(uint32(i))
		got := shared.Node{Label: n.Label, Lo: n.Lo, Hi: n.Hi, FirstChild: n.FirstChild, ChildCount: n.ChildCount}
		if got != want {
			t.Fatalf("node %d: C struct reads %+v, shared %+v", i, got, want)
		}
	}
	eps := asRecords[Endpoint](t, wire.Split(tree.Bytes()).Endpoints)
	for i, e := range eps {
		want := tree.Endpoint(uint32(i))
		if got := endpointOf(e); got != want {
			t.Fatalf("endpoint %d: C struct reads %+v, shared %+v", i, got, want)
		}
	}
	if len(nodes) == 0 || len(eps) == 0 {
		t.Fatal("random topology has no records")
	}
}

// endpointOf reads an endpoint struct as FORMAT.md defines the record.
func endpointOf(e Endpoint) shared.Endpoint {
	var raw [16]byte
	for i, w := range e.Addr {
		binary.NativeEndian.PutUint32(raw[4*i:], w)
	}
	var port [2]byte
	binary.NativeEndian.PutUint16(port[:], e.Port)
	addr := netip.AddrFrom16(raw)
	if e.Family == 4 {
		addr = netip.AddrFrom4([4]byte(raw[:4]))
	}
	return shared.Endpoint{
		Addr:      netip.AddrPortFrom(addr, binary.BigEndian.Uint16(port[:])),
		Weight:    e.Weight,
		Healthy:   e.Flags&1 != 0,
		CumWeight: e.CumWeight,
	}
}
