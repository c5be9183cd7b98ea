package shared

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

func loadJSON(t testing.TB, path string) *Topology {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var top Topology
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &top
}

// TestGolden pins the encoding of testdata/mesh.json byte for byte.
// Run `go test ./shared -run TestGolden -update` after an intended change.
func TestGolden(t *testing.T) {
	tree, err := Build(loadJSON(t, "testdata/mesh.json"), BuildOptions{Generation: 42})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "mesh.golden.bin")
	if *update {
		if err := os.WriteFile(golden, tree.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tree.Bytes(), want) {
		t.Fatalf("encoding changed: %d bytes, golden %d bytes; rerun with -update if intended", len(tree.Bytes()), len(want))
	}
	again, err := Build(loadJSON(t, "testdata/mesh.json"), BuildOptions{Generation: 42})
	if err != nil || !bytes.Equal(again.Bytes(), want) {
		t.Fatal("Build is not deterministic")
	}
}

// TestExactBytes writes the expected blob of a tiny topology by hand, field by
// field from docs/FORMAT.md, independently of the encoder.
func TestExactBytes(t *testing.T) { exactBytes(t, nil, 0, 0) }

// TestExactBytesLoadAware is TestExactBytes with a load band (format
// version 6): service bytes 56..57 load_high and 58..59 load_low, the
// defaults when the spec leaves them out.
func TestExactBytesLoadAware(t *testing.T) {
	h, l := uint32(300), uint32(7)
	exactBytes(t, &LoadAwareSpec{High: &h, Low: &l}, 300, 7)
	exactBytes(t, &LoadAwareSpec{}, 2, 1)
}

func exactBytes(t *testing.T, la *LoadAwareSpec, high, low uint16) {
	t.Helper()
	w3 := uint32(3)
	top := &Topology{Services: []ServiceSpec{{
		Name: "s", Scopes: []string{"zone"}, VIP: "127.77.0.1:80", Policy: "weighted", LoadAware: la,
		Endpoints: []EndpointSpec{
			{Address: "127.0.0.2:8080", Locality: Locality{"zone": "b"}},
			{Address: "127.0.0.1:8080", Locality: Locality{"zone": "a"}, Weight: &w3},
		},
	}}}
	tree, err := Build(top, BuildOptions{Generation: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Label("a") < Label("b")? Order the children by label, as the format says.
	first, second := "a", "b"
	firstAddr, secondAddr := byte(1), byte(2)
	firstW, secondW := uint32(3), uint32(1)
	if Label("b") < Label("a") {
		first, second = second, first
		firstAddr, secondAddr = secondAddr, firstAddr
		firstW, secondW = secondW, firstW
	}
	var b []byte
	u16 := func(v uint16) { b = binary.LittleEndian.AppendUint16(b, v) }
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	meta := []byte{1, 0, 's', 0, 4, 0, 'z', 'o', 'n', 'e', 1, 0, first[0], 1, 0, second[0]}
	// header
	b = append(b, 'L', 'T', 'R', 'E')
	u16(8)
	u16(64)
	u32(0) // checksum, patched below
	u32(0)
	u64(7)
	// services, nodes, endpoints, one policy record, two aux roots, strings
	total := 64 + 64 + 3*24 + 2*32 + 32 + 2*24 + len(meta)
	u32(uint32(total))
	u32(1)
	u32(3)
	u32(2)
	u32(uint32(len(meta)))
	u32(64)
	u32(128)
	u32(128 + 72)
	u32(128 + 72 + 64 + 32 + 48)
	u32(2) // aux_node_count
	// service
	u32(0)
	u32(3)
	u32(0)
	u32(2)
	u32(2)
	b = append(b, 1, 0, 1, 0) // levels, mode, policy weighted, health
	u32(0)
	u32(uint32(len(meta)))
	b = append(b, 127, 77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 80, 4)
	b = append(b, make([]byte, 5)...) // reserved byte 51, affinity_timeout
	u16(high)                         // load_high
	u16(low)                          // load_low
	b = append(b, make([]byte, 4)...) // reserved
	// nodes: root, then the two zones
	u64(0)
	u32(0)
	u32(2)
	u32(1)
	u32(2)
	u64(Label(first))
	u32(0)
	u32(1)
	u32(0)
	u32(0)
	u64(Label(second))
	u32(1)
	u32(2)
	u32(0)
	u32(0)
	// endpoints
	ep := func(last byte, w uint32, cum uint64) {
		b = append(b, 127, 0, 0, last, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1f, 0x90, 4, 1)
		u32(w)
		u64(cum)
	}
	ep(firstAddr, firstW, uint64(firstW))
	ep(secondAddr, secondW, 4)
	// policy record: degraded tree at aux 0 (1 node), unhealthy tree at aux 1
	// (1 node), no degraded endpoint, no priority load, reserved zero
	u32(0)
	u32(1)
	u32(1)
	u32(1)
	u32(0)
	b = append(b, make([]byte, 12)...)
	// aux nodes: the two empty roots, range [2, 2)
	for range 2 {
		u64(0)
		u32(2)
		u32(2)
		u32(0)
		u32(0)
	}
	b = append(b, meta...)
	binary.LittleEndian.PutUint32(b[8:], checksum(b))
	if !bytes.Equal(tree.Bytes(), b) {
		t.Fatalf("bytes differ from the hand-written layout:\n got %x\nwant %x", tree.Bytes(), b)
	}
}

// TestGoldenKeepsV1Records holds format versions 2 and 3 to their promise to the
// kernel path: the service, node and endpoint records and the strings of
// testdata/mesh.json are byte for byte those of the format-1 golden file
// (testdata/mesh.v1.golden.bin, written by the format-1 encoder), and the
// header differs only in version, checksum, total_size, strings_off and
// aux_node_count. The new sections sit between the endpoints and the strings.
func TestGoldenKeepsV1Records(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("testdata", "mesh.v1.golden.bin"))
	if err != nil {
		t.Fatal(err)
	}
	v2 := goldenTree(t).Bytes()
	u32 := func(b []byte, off int) int { return int(binary.LittleEndian.Uint32(b[off:])) }
	strOff1 := u32(v1, wire.HStringsOff)
	if !bytes.Equal(v1[wire.HeaderSize:strOff1], v2[wire.HeaderSize:strOff1]) {
		t.Fatal("service, node or endpoint records differ from format 1")
	}
	nSvc, nAux := u32(v2, wire.HServiceCount), u32(v2, wire.HAuxNodeCount)
	strOff2 := strOff1 + nSvc*wire.PolicyRecordSize + nAux*wire.NodeRecordSize
	if u32(v2, wire.HStringsOff) != strOff2 || !bytes.Equal(v1[strOff1:], v2[strOff2:]) {
		t.Fatalf("strings moved: at %d, want %d, or differ", u32(v2, wire.HStringsOff), strOff2)
	}
	h1, h2 := slices.Clone(v1[:wire.HeaderSize]), slices.Clone(v2[:wire.HeaderSize])
	for _, f := range []int{wire.HVersion, wire.HChecksum, wire.HTotalSize, wire.HStringsOff, wire.HAuxNodeCount} {
		copy(h1[f:f+2], []byte{0, 0})
		copy(h2[f:f+2], []byte{0, 0})
		if f != wire.HVersion {
			copy(h1[f:f+4], make([]byte, 4))
			copy(h2[f:f+4], make([]byte, 4))
		}
	}
	if !bytes.Equal(h1, h2) || v1[wire.HVersion] != 1 || v2[wire.HVersion] != FormatVersion || u32(v2, wire.HTotalSize) != len(v2) {
		t.Fatalf("headers differ beyond version, checksum, sizes and offsets:\n%x\n%x", h1, h2)
	}
}

// TestGoldenKeepsOlderBytes holds formats 3 to 8 to their promise: a tree
// without distribute rules (format 3), without the network rule (format 4),
// without it under spillover (format 5), without load_aware (format 6),
// without copies by a first scope other than network (format 7) and without
// classes before the locality (format 8) is byte for byte its older
// encoding (testdata/mesh.v2.golden.bin to mesh.v7.golden.bin, written by
// the format-2 to -7 encoders) but for the version field (the checksum
// starts at byte 12, after it).
func TestGoldenKeepsOlderBytes(t *testing.T) {
	now := goldenTree(t).Bytes()
	if now[wire.HVersion] != 8 {
		t.Fatalf("version %d, want 8", now[wire.HVersion])
	}
	for _, v := range []byte{2, 3, 4, 5, 6, 7} {
		old, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("mesh.v%d.golden.bin", v)))
		if err != nil {
			t.Fatal(err)
		}
		if old[wire.HVersion] != v {
			t.Fatalf("mesh.v%d.golden.bin has version %d", v, old[wire.HVersion])
		}
		b := slices.Clone(now)
		b[wire.HVersion] = v
		if !bytes.Equal(old, b) {
			t.Fatalf("the format-8 golden tree differs from the format-%d one beyond the version", v)
		}
	}
}

// TestExactBytesSpillover writes by hand, from docs/FORMAT.md, the blob of a
// service with spillover and one endpoint of each state, so every field of
// the policy record and of the aux node section is pinned.
func TestExactBytesSpillover(t *testing.T) {
	f := false
	top := &Topology{Services: []ServiceSpec{{
		Name: "s", Scopes: []string{"zone"},
		Spillover: &SpilloverSpec{OverprovisioningFactor: u32p(200), PanicThreshold: u32p(30)},
		Endpoints: []EndpointSpec{
			{Address: "127.0.0.3:80", Locality: Locality{"zone": "b"}, Healthy: &f},
			{Address: "127.0.0.2:80", Locality: Locality{"zone": "a"}, Degraded: true},
			{Address: "127.0.0.1:80", Locality: Locality{"zone": "a"}},
		},
	}}}
	tree, err := Build(top, BuildOptions{Generation: 9})
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	u16 := func(v uint16) { b = binary.LittleEndian.AppendUint16(b, v) }
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	node := func(label uint64, lo, hi, first, count uint32) { u64(label); u32(lo); u32(hi); u32(first); u32(count) }
	meta := []byte{1, 0, 's', 0, 4, 0, 'z', 'o', 'n', 'e', 1, 0, 'a'}
	// S=1, N=2 (root, a), E=3, A=4 (degraded: root, a; unhealthy: root, b)
	const nodesOff, epsOff, polsOff, auxOff, strOff = 128, 128 + 2*24, 176 + 3*32, 272 + 32, 304 + 4*24
	b = append(b, 'L', 'T', 'R', 'E')
	u16(8)
	u16(64)
	u32(0) // checksum, patched below
	u32(0)
	u64(9)
	u32(uint32(strOff + len(meta)))
	u32(1)
	u32(2)
	u32(3)
	u32(uint32(len(meta)))
	u32(64)
	u32(nodesOff)
	u32(epsOff)
	u32(strOff)
	u32(4)
	// service: root 0 (+2), endpoints from 0: 1 eligible of 3; levels 1, failover, random, only_healthy
	u32(0)
	u32(2)
	u32(0)
	u32(1)
	u32(3)
	b = append(b, 1, 0, 0, 0)
	u32(0)
	u32(uint32(len(meta)))
	b = append(b, make([]byte, 32)...) // no vip, reserved
	node(0, 0, 1, 1, 1)
	node(Label("a"), 0, 1, 0, 0)
	ep := func(last, flags byte, cum uint64) {
		b = append(b, 127, 0, 0, last, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 80, 4, flags)
		u32(1)
		u64(cum)
	}
	ep(1, 1, 1) // eligible
	ep(2, 0, 2) // degraded: flags 0
	ep(3, 0, 3) // unhealthy
	// policy: degraded tree at 0 (+2), unhealthy at 2 (+2), 1 degraded, factor 200, panic 30
	u32(0)
	u32(2)
	u32(2)
	u32(2)
	u32(1)
	u16(200)
	b = append(b, 30)
	b = append(b, make([]byte, 9)...)
	node(0, 1, 2, 1, 1)
	node(Label("a"), 1, 2, 0, 0)
	node(0, 2, 3, 3, 1)
	node(Label("b"), 2, 3, 0, 0)
	b = append(b, meta...)
	binary.LittleEndian.PutUint32(b[8:], checksum(b))
	if !bytes.Equal(tree.Bytes(), b) {
		t.Fatalf("bytes differ from the hand-written layout:\n got %x\nwant %x", tree.Bytes(), b)
	}
}
