package kernel

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/loctree/loctree/shared"
)

// TestWidenRecordsBytes: a load-aware service's widening records, byte for
// byte, for a tree worked by hand: nodes breadth-first (root, r1, z1, z2),
// each with the service's key, its path (the root's 0; each child's from
// its parent's, its scope key and its label) and its parent's index from
// the root; then each endpoint's deepest node, six per entry, the last
// entry padded with 0.
func TestWidenRecordsBytes(t *testing.T) {
	high := uint32(2)
	spec := shared.ServiceSpec{Name: "w", VIP: "127.77.30.1:80", Scopes: []string{"region", "zone"},
		LoadAware: &shared.LoadAwareSpec{High: &high},
		Endpoints: []shared.EndpointSpec{
			ep("127.0.30.1:80", "r1", "z1"), ep("127.0.30.2:80", "r1", "z1"), ep("127.0.30.3:80", "r1", "z2"),
		}}
	tree := mustBuild(t, &shared.Topology{Services: []shared.ServiceSpec{spec}}, 1)
	s, _ := tree.Service("w")
	got, err := widenRecords(tree, s)
	if err != nil {
		t.Fatal(err)
	}
	svc := shared.Label("w")
	region, zone := shared.Label("region"), shared.Label("zone")
	r1 := widenStep(0, region, shared.Label("r1"))
	z1, z2 := widenStep(r1, zone, shared.Label("z1")), widenStep(r1, zone, shared.Label("z2"))
	le := binary.LittleEndian
	var want []byte
	for _, n := range []struct {
		path   uint64
		parent uint32
	}{{0, widenRoot}, {r1, 0}, {z1, 1}, {z2, 1}} {
		want = le.AppendUint32(le.AppendUint32(le.AppendUint64(le.AppendUint64(want, svc), n.path), n.parent), 0)
	}
	for _, leaf := range []uint32{2, 2, 3, 0, 0, 0} {
		want = le.AppendUint32(want, leaf)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("widening records:\n got %x\nwant %x", got, want)
	}
	if n := widenLen(s); int(n)*24 != len(want) {
		t.Fatalf("widenLen %d entries, the records take %d bytes", n, len(want))
	}
}
