package shared

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

// networkTopology has no endpoint on net-a; the other networks' endpoints
// are in three regions.
func networkTopology(rule string) *Topology {
	return &Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"network", "region"}, NetworkRule: rule, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:80", Locality: Locality{"network": "net-b", "region": "us-east"}},
		{Address: "127.0.0.2:80", Locality: Locality{"network": "net-c", "region": "us-west"}},
		{Address: "127.0.0.3:80", Locality: Locality{"network": "net-d", "region": "eu"}},
		{Address: "127.0.0.4:80", Locality: Locality{"network": "net-d", "region": "us-east"}},
	}}}}
}

// TestNetworkRule follows istio/ztunnel src/state.rs load_balance at
// 62d82653 (lines 438-439, 463-489): with network first, a source on a
// network without endpoints gets the other networks' endpoints of the
// deepest match over the remaining scopes (127.0.0.1 and 127.0.0.4, both
// us-east, on two networks); a source with endpoints on its network gets
// only those. network_rule: plain keeps the older rule (every endpoint).
func TestNetworkRule(t *testing.T) {
	for _, c := range []struct {
		rule, network string
		want          []string
		depth         int
		cross         bool
	}{
		{"", "net-a", []string{"127.0.0.1:80", "127.0.0.4:80"}, 1, true},
		{"ztunnel", "net-a", []string{"127.0.0.1:80", "127.0.0.4:80"}, 1, true},
		{"", "net-c", []string{"127.0.0.2:80"}, 1, false},
		{"plain", "net-a", []string{"127.0.0.1:80", "127.0.0.2:80", "127.0.0.3:80", "127.0.0.4:80"}, 0, false},
	} {
		tree, err := Build(networkTopology(c.rule), BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		r := svc.Lookup(Locality{"network": c.network, "region": "us-east"})
		if got := rangeAddrs(tree, r); !slices.Equal(got, c.want) || r.Depth != c.depth || svc.CrossNetwork(r) != c.cross {
			t.Errorf("rule %q, source on %s: %v (depth %d, cross-network %v), want %v (%d, %v)", c.rule, c.network, got, r.Depth, svc.CrossNetwork(r), c.want, c.depth, c.cross)
		}
	}
}

// TestNetworkRuleRefused: an explicit network_rule that cannot apply, or
// a typo, is an error naming it; spillover with network first builds with
// the rule (Istio's failoverPriority network rule), explicit or not, and
// refuses failover rules with two scopes before region (Istio ranks each
// rank of them again by region, zone and subzone; the copies by the first
// scope hold that for one).
func TestNetworkRuleRefused(t *testing.T) {
	for _, c := range []struct {
		name, want string
		mut        func(s *ServiceSpec)
	}{
		{"typo", `network_rule "ztunel"`, func(s *ServiceSpec) { s.NetworkRule = "ztunel" }},
		{"not first", "needs network as the first scope", func(s *ServiceSpec) {
			s.NetworkRule, s.Scopes = "ztunnel", []string{"region", "network"}
		}},
		{"alone", "needs a scope after network", func(s *ServiceSpec) { s.NetworkRule, s.Scopes = "ztunnel", []string{"network"} }},
		{"strict", "no effect in mode strict", func(s *ServiceSpec) { s.NetworkRule, s.Mode = "ztunnel", "strict" }},
		{"bounded", "no effect with failover_limit", func(s *ServiceSpec) { s.NetworkRule, s.FailoverLimit = "ztunnel", "network" }},
		{"network and two labels before region", "up to 3 scopes before region (2 under the network rule); put at most that many before region, or set failover_limit: env", func(s *ServiceSpec) {
			s.Spillover, s.Scopes = &SpilloverSpec{}, []string{"network", "cluster", "env", "region"}
			s.Failover = []FailoverSpec{{From: "r1", To: "r2"}}
		}},
		{"four labels before region", "up to 3 scopes before region (2 under the network rule); put at most that many before region, or set failover_limit: team", func(s *ServiceSpec) {
			s.Spillover, s.Scopes = &SpilloverSpec{}, []string{"cluster", "network", "env", "team", "region"}
			s.Failover = []FailoverSpec{{From: "r1", To: "r2"}}
		}},
		{"zone apart", "zone must follow region directly", func(s *ServiceSpec) {
			s.Spillover, s.Scopes = &SpilloverSpec{}, []string{"region", "node", "zone"}
			s.Failover = []FailoverSpec{{From: "r1", To: "r2"}}
		}},
	} {
		top := networkTopology("")
		c.mut(&top.Services[0])
		if _, err := Build(top, BuildOptions{}); !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidTopology mentioning %q", c.name, err, c.want)
		}
	}
	top := networkTopology("")
	top.Services[0].Spillover = &SpilloverSpec{}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := tree.Services()[0]; s.networkRule || !s.netOther {
		t.Fatal("spillover with network first: want the other-network trees (Istio's network rule), not the lookup's network tree")
	}
	top.Services[0].NetworkRule = "ztunnel"
	if _, err := Build(top, BuildOptions{}); err != nil {
		t.Fatalf("explicit ztunnel with spillover: %v", err)
	}
	bounded := networkTopology("")
	spec := &bounded.Services[0]
	spec.Spillover, spec.FailoverLimit, spec.Scopes = &SpilloverSpec{}, "network", []string{"network", "region"}
	spec.Failover = []FailoverSpec{{From: "r1", To: "r2"}}
	if _, err := Build(bounded, BuildOptions{}); err != nil { // no other network has a priority
		t.Fatalf("failover with network first and failover_limit network: %v", err)
	}
}

// TestExactBytesNetworkRule writes a format-4 tree with the network rule by
// hand from docs/FORMAT.md: the copies of the eligible endpoints follow
// them, sorted by zone; the network tree follows the unhealthy tree in the
// aux section and policy bytes 26 and 28..31 say so.
func TestExactBytesNetworkRule(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "n", Scopes: []string{"network", "zone"}, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:8080", Locality: Locality{"network": "x", "zone": "b"}},
		{Address: "127.0.0.2:8080", Locality: Locality{"network": "y", "zone": "a"}},
	}}}}
	tree, err := Build(top, BuildOptions{Generation: 9})
	if err != nil {
		t.Fatal(err)
	}
	// Endpoint 1 is on x in zone b, endpoint 2 on y in zone a.
	net := [2]string{"x", "y"}
	zoneOf := map[string]string{"x": "b", "y": "a"}
	addrOf := map[string]byte{"x": 1, "y": 2}
	if Label("y") < Label("x") {
		net = [2]string{"y", "x"}
	}
	zones := [2]string{"a", "b"}
	netOfZone := map[string]string{"a": "y", "b": "x"}
	if Label("b") < Label("a") {
		zones = [2]string{"b", "a"}
	}
	var b []byte
	u16 := func(v uint16) { b = binary.LittleEndian.AppendUint16(b, v) }
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	node := func(label uint64, lo, hi, first, count uint32) { u64(label); u32(lo); u32(hi); u32(first); u32(count) }
	var meta []byte
	for _, s := range []string{"n", "", "network", "zone", net[0], net[1], zoneOf[net[0]], zoneOf[net[1]]} {
		meta = binary.LittleEndian.AppendUint16(meta, uint16(len(s)))
		meta = append(meta, s...)
	}
	meta = slices.Delete(meta, 3, 5) // the host count is one byte (0), not a string
	meta = slices.Insert(meta, 3, 0)
	// header: 1 service, 5 nodes, 4 endpoint records (2 + 2 copies), 5 aux nodes
	b = append(b, 'L', 'T', 'R', 'E')
	u16(8)
	u16(64)
	u32(0) // checksum, patched below
	u32(0)
	u64(9)
	strOff := 64 + 64 + 5*24 + 4*32 + 32 + 5*24
	u32(uint32(strOff + len(meta)))
	u32(1)
	u32(5)
	u32(4)
	u32(uint32(len(meta)))
	u32(64)
	u32(128)
	u32(128 + 120)
	u32(uint32(strOff))
	u32(5)
	// service: root 0, 5 nodes, endpoints from 0, 2 eligible of 2, 2 levels
	u32(0)
	u32(5)
	u32(0)
	u32(2)
	u32(2)
	b = append(b, 2, 0, 0, 0)
	u32(0)
	u32(uint32(len(meta)))
	b = append(b, make([]byte, 32)...)
	// nodes: root, the two networks, their zones
	node(0, 0, 2, 1, 2)
	node(Label(net[0]), 0, 1, 3, 1)
	node(Label(net[1]), 1, 2, 4, 1)
	node(Label(zoneOf[net[0]]), 0, 1, 0, 0)
	node(Label(zoneOf[net[1]]), 1, 2, 0, 0)
	// endpoints by network, then the copies by zone; cum_weight runs on
	ep := func(last byte, cum uint64) {
		b = append(b, 127, 0, 0, last, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1f, 0x90, 4, 1)
		u32(1)
		u64(cum)
	}
	ep(addrOf[net[0]], 1)
	ep(addrOf[net[1]], 2)
	ep(addrOf[netOfZone[zones[0]]], 3)
	ep(addrOf[netOfZone[zones[1]]], 4)
	// policy: degraded tree at aux 0, unhealthy at aux 1 (1 node each),
	// network_rule 1, network tree of 3 nodes (at aux 2)
	u32(0)
	u32(1)
	u32(1)
	u32(1)
	u32(0)
	b = append(b, 0, 0, 0, 0, 0, 0, 1, 0)
	u32(3)
	// aux: the two empty roots, then the network tree over the copies [2, 4)
	node(0, 2, 2, 0, 0)
	node(0, 2, 2, 0, 0)
	node(0, 2, 4, 3, 2)
	node(Label(zones[0]), 2, 3, 0, 0)
	node(Label(zones[1]), 3, 4, 0, 0)
	b = append(b, meta...)
	binary.LittleEndian.PutUint32(b[8:], checksum(b))
	if !bytes.Equal(tree.Bytes(), b) {
		t.Fatalf("bytes differ from the hand-written layout:\n got %x\nwant %x", tree.Bytes(), b)
	}
}

// TestDecodeRejectsBadNetworkRule: a corrupt network rule, tree or copy is
// an error naming it, never a panic.
func TestDecodeRejectsBadNetworkRule(t *testing.T) {
	tree, err := Build(networkTopology(""), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := tree.Bytes()
	pol := int(le.Uint32(orig[wire.HEndpointsOff:])) + wire.EndpointRecordSize*int(le.Uint32(orig[wire.HEndpointCnt:]))
	aux := pol + wire.PolicyRecordSize
	copy0 := int(le.Uint32(orig[wire.HEndpointsOff:])) + 4*wire.EndpointRecordSize
	for _, c := range []struct {
		name, want string
		mut        func(b []byte)
	}{
		{"rule 8", "network rule 8 with a network tree", func(b []byte) { b[pol+wire.PNetworkRule] = 8 }},
		{"rule 5 (classes) without spillover", "overprovisioning factor 0", func(b []byte) { b[pol+wire.PNetworkRule] = 5 }},
		{"rule 4 without failover rules", "network rule 4 with 0 failover rules", func(b []byte) { b[pol+wire.PNetworkRule] = 4 }},
		{"rule 3 without spillover", "overprovisioning factor 0", func(b []byte) { b[pol+wire.PNetworkRule] = 3 }},
		{"rule 2 without spillover", "overprovisioning factor 0", func(b []byte) { b[pol+wire.PNetworkRule] = 2 }},
		{"rule off, tree on", "network rule 0", func(b []byte) { b[pol+wire.PNetworkRule] = 0 }},
		{"tree past the aux nodes", "network tree at", func(b []byte) { le.PutUint32(b[pol+wire.PNetworkCount:], 100) }},
		{"tree shape", "network tree: corrupt tree: root node", func(b []byte) { le.PutUint32(b[aux+2*wire.NodeRecordSize+wire.NHi:], 3) }},
		{"copy address", "copies are not the eligible endpoints", func(b []byte) { b[copy0+3] = 9 }},
		{"copy weight", "cumulative weight", func(b []byte) { b[copy0+wire.EWeight] = 2 }},
		{"copy health", "health does not match", func(b []byte) { b[copy0+wire.EFlags] = 0 }},
	} {
		b := bytes.Clone(orig)
		c.mut(b)
		le.PutUint32(b[wire.HChecksum:], checksum(b))
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt mentioning %q", c.name, err, c.want)
		}
	}
}

// TestNetworkRuleAllocatesNothing: the lookups that take the network tree
// and the pick in the copies allocate nothing.
func TestNetworkRuleAllocatesNothing(t *testing.T) {
	tree, err := Build(networkTopology(""), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := tree.Services()[0]
	loc := Locality{"network": "net-a", "region": "us-east"}
	src := NewSource(loc)
	p := NewPicker(tree, PickerOptions{Seed: 1})
	var ok bool
	allocs := testing.AllocsPerRun(1000, func() {
		_, ok = p.Pick(svc, svc.LookupSource(src), 0)
		_ = svc.Lookup(loc)
	})
	if allocs != 0 || !ok || !svc.CrossNetwork(svc.LookupSource(src)) {
		t.Fatalf("%v allocations a lookup and pick (picked %v)", allocs, ok)
	}
}

// TestExactBytesNetworkPriorities writes a format-5 tree with the network
// rule of a spillover service by hand from docs/FORMAT.md ("Network rule
// with a priority load"): endpoint 1 on x in zone b, endpoint 2 on y in
// zone a, both healthy. After the two endpoints come the eligible set's
// copies per network in label order, otherNetwork (Label("\x00")) among
// them: for x the endpoint on y, for y the one on x, for otherNetwork both
// by zone. The other-network tree follows the two empty aux roots: its
// root, the set's child (label 1), a child per network, then the zones.
// Policy byte 26 is 2, bytes 28..31 the tree's 9 nodes.
func TestExactBytesNetworkPriorities(t *testing.T) { exactBytesOtherCopies(t, "network", 2) }

// TestExactBytesFirstScopeCopies writes a format-7 tree by hand from
// docs/FORMAT.md ("Copies by the first scope"): the tree of
// TestExactBytesNetworkPriorities with cluster for network, the same
// copies and other-value tree; policy byte 26 is 3, the other clusters'
// endpoints being one priority (no failover rules).
func TestExactBytesFirstScopeCopies(t *testing.T) { exactBytesOtherCopies(t, "cluster", 3) }

func exactBytesOtherCopies(t *testing.T, first string, rule byte) {
	top := &Topology{Services: []ServiceSpec{{Name: "n", Scopes: []string{first, "zone"}, Spillover: &SpilloverSpec{}, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:8080", Locality: Locality{first: "x", "zone": "b"}},
		{Address: "127.0.0.2:8080", Locality: Locality{first: "y", "zone": "a"}},
	}}}}
	tree, err := Build(top, BuildOptions{Generation: 9})
	if err != nil {
		t.Fatal(err)
	}
	byLabel := func(s ...string) []string {
		slices.SortFunc(s, func(a, b string) int { return cmp.Compare(Label(a), Label(b)) })
		return s
	}
	net, zones := byLabel("x", "y"), byLabel("a", "b")
	others := byLabel("x", "y", "\x00") // the networks of the copies
	zoneOf := map[string]string{"x": "b", "y": "a"}
	addrOf := map[string]byte{"x": 1, "y": 2}
	netOfZone := map[string]string{"a": "y", "b": "x"}
	h := &handBlob{}
	node, ep := h.node, h.ep
	meta := handMeta("n", first, "zone", net[0], net[1], zoneOf[net[0]], zoneOf[net[1]])
	// header: 1 service, 5 nodes, 6 endpoint records (2 + 4 copies), 11 aux
	// nodes; the service: 2 eligible of 2, 2 levels
	h.head(9, 5, 6, 11, 2, meta)
	// nodes: root, the two networks, their zones
	node(0, 0, 2, 1, 2)
	node(Label(net[0]), 0, 1, 3, 1)
	node(Label(net[1]), 1, 2, 4, 1)
	node(Label(zoneOf[net[0]]), 0, 1, 0, 0)
	node(Label(zoneOf[net[1]]), 1, 2, 0, 0)
	// endpoints by network, then per network of the copies the endpoints
	// not on it, by zone; cum_weight runs on
	ep(addrOf[net[0]])
	ep(addrOf[net[1]])
	type copyRange struct{ lo, hi uint32 }
	ranges := map[string]copyRange{}
	at := uint32(2)
	for _, m := range others {
		lo := at
		for _, z := range zones {
			if n := netOfZone[z]; n != m {
				ep(addrOf[n])
				at++
			}
		}
		ranges[m] = copyRange{lo, at}
	}
	// policy: degraded tree at aux 0, unhealthy at aux 1 (1 node each),
	// factor 140, panic 50, network_rule 2 (3), other-network tree of 9 nodes
	h.spillPolicy(rule, 9)
	// aux: the two empty roots; the other-network tree (aux 2..10): its
	// root over the copies [2, 6), the eligible set's child (label 1), the
	// networks (aux 4..6), the zones (aux 7..10)
	node(0, 2, 2, 0, 0)
	node(0, 2, 2, 0, 0)
	node(0, 2, 6, 3, 1)
	node(1, 2, 6, 4, 3)
	child := uint32(7)
	for _, m := range others {
		n := uint32(1)
		if m == "\x00" {
			n = 2
		}
		node(Label(m), ranges[m].lo, ranges[m].hi, child, n)
		child += n
	}
	for _, m := range others {
		k := ranges[m].lo
		for _, z := range zones {
			if netOfZone[z] != m {
				node(Label(z), k, k+1, 0, 0)
				k++
			}
		}
	}
	b := h.done(meta)
	if !bytes.Equal(tree.Bytes(), b) {
		t.Fatalf("bytes differ from the hand-written layout:\n got %x\nwant %x", tree.Bytes(), b)
	}
	if OtherNetworkLabel() != Label("\x00") {
		t.Fatalf("OtherNetworkLabel %#x, Label(\"\\x00\") %#x", OtherNetworkLabel(), Label("\x00"))
	}
}

// TestDecodeRejectsOtherRuleMismatch: a cluster-first spillover service
// with a failover rule has network_rule 4 (the other clusters ranked by
// region, zone and subzone); the same bytes with 3 (one priority, which
// Build writes only without failover rules) or 2 (the network rule, which
// needs network first) are corrupt, as a reader would rank them otherwise.
func TestDecodeRejectsOtherRuleMismatch(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "c", Scopes: []string{"cluster", "region"}, Spillover: &SpilloverSpec{},
		Failover: []FailoverSpec{{From: "r1", To: "r2"}}, Endpoints: []EndpointSpec{
			{Address: "127.0.0.1:80", Locality: Locality{"cluster": "c1", "region": "r1"}},
			{Address: "127.0.0.2:80", Locality: Locality{"cluster": "c2", "region": "r2"}},
		}}}}
	tree := mustBuild(t, top)
	orig := tree.Bytes()
	pol := int(le.Uint32(orig[wire.HEndpointsOff:])) + wire.EndpointRecordSize*int(le.Uint32(orig[wire.HEndpointCnt:]))
	if orig[pol+wire.PNetworkRule] != 4 {
		t.Fatalf("network_rule %d, want 4", orig[pol+wire.PNetworkRule])
	}
	for rule, want := range map[byte]string{3: "network rule 3 with 1 failover rules", 2: "network rule with scopes [cluster region]"} {
		b := bytes.Clone(orig)
		b[pol+wire.PNetworkRule] = rule
		le.PutUint32(b[wire.HChecksum:], checksum(b))
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("rule %d: %v, want ErrCorrupt mentioning %q", rule, err, want)
		}
	}
}

// TestOtherCopiesBounded: copies by the first scope grow with the
// endpoints times its values; past maxCopies Build refuses the service,
// naming the scopes, rather than encoding a tree of hundreds of megabytes
// (200 clusters of 105 endpoints: 4,179,000 copies plus the other
// clusters' whole copies; red without the bound: it builds).
func TestOtherCopiesBounded(t *testing.T) {
	spec := ServiceSpec{Name: "wide", Scopes: []string{"cluster", "region"}, Spillover: &SpilloverSpec{}}
	for i := range 21000 {
		spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.%d.%d.%d:80", 1+i/62500, i/250%250, i%250+1),
			Locality: Locality{"cluster": fmt.Sprintf("c%d", i%200), "region": "r1"}})
	}
	_, err := Build(&Topology{Services: []ServiceSpec{spec}}, BuildOptions{})
	if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), "too many values") || !strings.Contains(err.Error(), "[cluster]") {
		t.Fatalf("Build: %v, want the copies refused naming [cluster]", err)
	}
}

// TestExactBytesClasses writes a format-8 tree by hand from docs/FORMAT.md
// ("Classes before the locality"): scopes [a, b, zone], spillover, no
// failover rules; two endpoints, both on a=x, one on b=p in zone z1, one
// on b=q in z2. Its groups: the class that differs at b (keys
// classKey(1, x, p), (x, q), (x, otherNetwork)) and the other values of a
// (keys x, which copies nothing, and otherNetwork); each key's copies are
// the set's endpoints of its class by zone, its node repeated once (the
// chain of 2 levels) above their zones. Policy byte 26 is 3 + 3.
func TestExactBytesClasses(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "n", Scopes: []string{"a", "b", "zone"}, Spillover: &SpilloverSpec{}, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:8080", Locality: Locality{"a": "x", "b": "p", "zone": "z1"}},
		{Address: "127.0.0.2:8080", Locality: Locality{"a": "x", "b": "q", "zone": "z2"}},
	}}}}
	tree, err := Build(top, BuildOptions{Generation: 9})
	if err != nil {
		t.Fatal(err)
	}
	// SplitMix64's finalizer, and a class's key as docs/FORMAT.md gives it.
	fmix := func(x uint64) uint64 {
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		return x ^ x>>31
	}
	key := func(d uint64, values ...uint64) uint64 {
		h := fmix((d | 1<<8) ^ 0x243f6a8885a308d3)
		for _, v := range values {
			h = fmix(h ^ v)
		}
		return h
	}
	other := Label("\x00")
	bs := []string{"p", "q"}
	slices.SortFunc(bs, func(a, b string) int { return cmp.Compare(Label(a), Label(b)) })
	zoneOf := map[string]string{"p": "z1", "q": "z2"}
	addrOf := map[string]byte{"p": 1, "q": 2}
	zones := []string{"z1", "z2"}
	slices.SortFunc(zones, func(a, b string) int { return cmp.Compare(Label(a), Label(b)) })
	bOfZone := map[string]string{"z1": "p", "z2": "q"}
	// the keys with copies, and which b values each copies
	type group struct {
		key    uint64
		copies []string // b values of the endpoints copied, by zone label
	}
	byZone := func(drop string) []string {
		var out []string
		for _, z := range zones {
			if bOfZone[z] != drop {
				out = append(out, bOfZone[z])
			}
		}
		return out
	}
	groups := []group{
		{key(1, Label("x"), Label("p")), byZone("p")},
		{key(1, Label("x"), Label("q")), byZone("q")},
		{key(1, Label("x"), other), byZone("")},
		{other, byZone("")}, // a ≠ otherNetwork: every endpoint; a ≠ x: none, no node
	}
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(a.key, b.key) })
	h := &handBlob{}
	node, ep := h.node, h.ep
	meta := handMeta("n", "a", "b", "zone", "x", bs[0], bs[1], zoneOf[bs[0]], zoneOf[bs[1]])
	// header: 1 service, 6 nodes, 8 endpoint records (2 + 6 copies), 18 aux
	// nodes; the service: 2 eligible of 2, 3 levels
	h.head(9, 6, 2+6, 2+16, 3, meta)
	// nodes: root, x, its b values, their zones
	node(0, 0, 2, 1, 1)
	node(Label("x"), 0, 2, 2, 2)
	node(Label(bs[0]), 0, 1, 4, 1)
	node(Label(bs[1]), 1, 2, 5, 1)
	node(Label(zoneOf[bs[0]]), 0, 1, 0, 0)
	node(Label(zoneOf[bs[1]]), 1, 2, 0, 0)
	ep(addrOf[bs[0]])
	ep(addrOf[bs[1]])
	at := uint32(2)
	var ranges [][2]uint32
	for _, g := range groups {
		lo := at
		for _, v := range g.copies {
			ep(addrOf[v])
			at++
		}
		ranges = append(ranges, [2]uint32{lo, at})
	}
	// policy: degraded tree at aux 0, unhealthy at aux 1, factor 140, panic
	// 50, network_rule 6, an other-value tree of 16 nodes
	h.spillPolicy(6, 16)
	// aux: the two empty roots; the other-value tree (aux 2..17): its root
	// over the copies [2, 8), the eligible set (label 1), the keys (aux
	// 4..7), their chains (8..11), the zones (12..17)
	node(0, 2, 2, 0, 0)
	node(0, 2, 2, 0, 0)
	node(0, 2, 8, 3, 1)
	node(1, 2, 8, 4, uint32(len(groups)))
	for i, g := range groups {
		node(g.key, ranges[i][0], ranges[i][1], 8+uint32(i), 1)
	}
	zone := uint32(12)
	for i, g := range groups {
		node(g.key, ranges[i][0], ranges[i][1], zone, uint32(len(g.copies)))
		zone += uint32(len(g.copies))
	}
	for i, g := range groups {
		k := ranges[i][0]
		for _, v := range g.copies {
			node(Label(zoneOf[v]), k, k+1, 0, 0)
			k++
		}
	}
	b := h.done(meta)
	if !bytes.Equal(tree.Bytes(), b) {
		t.Fatalf("bytes differ from the hand-written layout:\n got %x\nwant %x", tree.Bytes(), b)
	}
	if _, err := Decode(tree.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// handBlob writes a tree blob by hand, field by field from docs/FORMAT.md,
// for the exact-bytes tests of one service with copies.
type handBlob struct {
	b   []byte
	cum uint64 // the endpoints' running weight
}

func (h *handBlob) u16(v uint16) { h.b = binary.LittleEndian.AppendUint16(h.b, v) }
func (h *handBlob) u32(v uint32) { h.b = binary.LittleEndian.AppendUint32(h.b, v) }
func (h *handBlob) u64(v uint64) { h.b = binary.LittleEndian.AppendUint64(h.b, v) }

// node is a node record.
func (h *handBlob) node(label uint64, lo, hi, first, count uint32) {
	h.u64(label)
	h.u32(lo)
	h.u32(hi)
	h.u32(first)
	h.u32(count)
}

// ep is the endpoint record of 127.0.0.last:8080, healthy, weight 1.
func (h *handBlob) ep(last byte) {
	h.cum++
	h.b = append(h.b, 127, 0, 0, last, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1f, 0x90, 4, 1)
	h.u32(1)
	h.u64(h.cum)
}

// head writes the header of a format-8 tree of one service with nodes
// nodes, eps endpoint records, aux aux nodes and the strings meta, and the
// service record: root 0, endpoints from 0, 2 eligible of 2, levels levels.
func (h *handBlob) head(gen uint64, nodes, eps, aux, levels int, meta []byte) {
	strOff := 64 + 64 + nodes*24 + eps*32 + 32 + aux*24
	h.b = append(h.b, 'L', 'T', 'R', 'E')
	h.u16(8)
	h.u16(64)
	h.u32(0) // checksum, patched by done
	h.u32(0)
	h.u64(gen)
	for _, v := range []int{strOff + len(meta), 1, nodes, eps, len(meta), 64, 128, 128 + nodes*24, strOff, aux} {
		h.u32(uint32(v))
	}
	for _, v := range []uint32{0, uint32(nodes), 0, 2, 2} {
		h.u32(v)
	}
	h.b = append(h.b, byte(levels), 0, 0, 0)
	h.u32(0)
	h.u32(uint32(len(meta)))
	h.b = append(h.b, make([]byte, 32)...)
}

// spillPolicy is the policy record of a service with the default priority
// load (factor 140, panic 50), its degraded and unhealthy trees one empty
// root each at aux 0 and 1, no failover or distribute rule, network_rule
// rule and an other-value tree of count nodes.
func (h *handBlob) spillPolicy(rule byte, count uint32) {
	for _, v := range []uint32{0, 1, 1, 1, 0} {
		h.u32(v)
	}
	h.u16(140)
	h.b = append(h.b, 50, 0, 0, 0, rule, 0)
	h.u32(count)
}

// done appends the strings and patches the checksum.
func (h *handBlob) done(meta []byte) []byte {
	h.b = append(h.b, meta...)
	binary.LittleEndian.PutUint32(h.b[8:], checksum(h.b))
	return h.b
}

// handMeta is the strings section of service name with no host: its name,
// a host count of 0, then each of strs as a length-prefixed string.
func handMeta(name string, strs ...string) []byte {
	meta := binary.LittleEndian.AppendUint16(nil, uint16(len(name)))
	meta = append(meta, name...)
	meta = append(meta, 0)
	for _, s := range strs {
		meta = binary.LittleEndian.AppendUint16(meta, uint16(len(s)))
		meta = append(meta, s...)
	}
	return meta
}
