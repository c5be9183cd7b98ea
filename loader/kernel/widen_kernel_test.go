package kernel

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// The load-aware tests' service: scopes region, zone; two endpoints in each
// of r1/z1 (the source's zone), r1/z2 and r2/z3. With the band high 2,
// low 1, z1 widens to r1 above 4 open connections and narrows below 2; r1
// widens to the root above 8.
var (
	laZ1     = []string{"127.0.25.1:9025", "127.0.25.2:9025"}
	laZ2     = []string{"127.0.25.3:9025", "127.0.25.4:9025"}
	laR2     = []string{"127.0.25.5:9025", "127.0.25.6:9025"}
	laSource = shared.Locality{"region": "r1", "zone": "z1"}
)

const laVIP = "127.77.25.1:80"

// laService is the load-aware service over the given endpoints, at vip.
func laService(name, vip string, eps map[string][2]string, limit string) shared.ServiceSpec {
	high, low := uint32(2), uint32(1)
	s := shared.ServiceSpec{Name: name, VIP: vip, Scopes: []string{"region", "zone"}, FailoverLimit: limit,
		LoadAware: &shared.LoadAwareSpec{High: &high, Low: &low}}
	for _, a := range slices.Sorted(mapKeys(eps)) {
		s.Endpoints = append(s.Endpoints, ep(a, eps[a][0], eps[a][1]))
	}
	return s
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// laEndpoints are the pool's endpoints by address: region and zone.
func laEndpoints() map[string][2]string {
	out := map[string][2]string{}
	for _, a := range laZ1 {
		out[a] = [2]string{"r1", "z1"}
	}
	for _, a := range laZ2 {
		out[a] = [2]string{"r1", "z2"}
	}
	for _, a := range laR2 {
		out[a] = [2]string{"r2", "z3"}
	}
	return out
}

func laTopology(limit string) *shared.Topology {
	return &shared.Topology{Services: []shared.ServiceSpec{laService("la", laVIP, laEndpoints(), limit)}}
}

// held are connections the test keeps open, by the backend that took them.
type held map[string][]net.Conn

// open connects to vip, reads which backend took the connection, and
// keeps it open.
func (h held) open(t *testing.T, vip string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", vip, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	who, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	h[string(who)] = append(h[string(who)], c)
	return string(who)
}

// close closes one connection held to backend b.
func (h held) close(t *testing.T, b string) {
	t.Helper()
	cs := h[b]
	if len(cs) == 0 {
		t.Fatalf("no connection held to %s", b)
	}
	cs[len(cs)-1].Close()
	h[b] = cs[:len(cs)-1]
}

// closeIn closes held connections to the backends of pool until n are
// left among them.
func (h held) closeIn(t *testing.T, pool []string, n int) {
	t.Helper()
	for h.in(pool) > n {
		for _, b := range pool {
			if len(h[b]) > 0 && h.in(pool) > n {
				h.close(t, b)
			}
		}
	}
}

func (h held) in(pool []string) int {
	n := 0
	for _, b := range pool {
		n += len(h[b])
	}
	return n
}

func (h held) closeAll() {
	for _, cs := range h {
		for _, c := range cs {
			c.Close()
		}
	}
	clear(h)
}

// asks makes n short connections (each closed before the next) and
// returns how many landed on each backend.
func asks(t *testing.T, vip string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		got, err := kerneltest.Ask(vip)
		if err != nil {
			t.Fatalf("%s: %v", vip, err)
		}
		seen[got]++
	}
	return seen
}

// within says whether every backend seen is in pool.
func within(seen map[string]int, pools ...[]string) bool {
	for b := range seen {
		if !slices.ContainsFunc(pools, func(p []string) bool { return slices.Contains(p, b) }) {
			return false
		}
	}
	return true
}

func reached(seen map[string]int, pool []string) bool {
	return slices.ContainsFunc(pool, func(b string) bool { return seen[b] > 0 })
}

// nodeState is the kernel's count and state of the node of service name
// reached by the scope values path (region, then zone), read from lt_widen
// under the key the docs define: (hash of the name, hash of the path).
func nodeState(t *testing.T, in *Installer, name string, path ...string) bpf.WidenVal {
	t.Helper()
	k := bpf.WidenKey{Svc: max(shared.Label(name), 1)}
	for i, v := range path {
		k.Path = widenStep(k.Path, shared.Label([]string{"region", "zone"}[i]), shared.Label(v))
	}
	var v bpf.WidenVal
	if err := in.k.objs.LtWiden.Lookup(&k, &v); err != nil {
		t.Fatalf("%s %v: %v", name, path, err)
	}
	return v
}

// wantCount checks the kernel's count of a node against the connections
// the test holds to its endpoints.
func wantCount(t *testing.T, in *Installer, h held, pool []string, name string, path ...string) {
	t.Helper()
	if got := nodeState(t, in, name, path...).Count; got != int64(h.in(pool)) {
		t.Fatalf("%s %v counts %d open connections; the test holds %d", name, path, got, h.in(pool))
	}
}

// TestLoadAwareWidensInKernel: connections held open on the source's zone
// past the band's high edge (z1: more than 2 × 2) send the next connects
// to its region, r1 (z1 and z2), not beyond; between the edges the zone
// stays wide, below the low edge (fewer than 1 × 2) it narrows back; past
// r1's own high edge (8) the next connects reach r2. Closing everything
// leaves every count at 0, and the connects are local again.
func TestLoadAwareWidensInKernel(t *testing.T) {
	kerneltest.RequireRoot(t)
	_, in := install(t, laTopology(""), laSource)
	h := held{}
	defer h.closeAll()
	for i := range 5 { // at 0..4 open z1 is not above 4: narrow
		if b := h.open(t, laVIP); !slices.Contains(laZ1, b) {
			t.Fatalf("connection %d with %d open went to %s, outside z1 (not above the high edge)", i+1, i, b)
		}
	}
	wantCount(t, in, h, laZ1, "la", "r1", "z1")
	wantCount(t, in, h, append(laZ1, laZ2...), "la", "r1")
	if seen := asks(t, laVIP, 40); !within(seen, laZ1, laZ2) || !reached(seen, laZ2) {
		t.Fatalf("5 open on z1 (above 4): connects went to %v; want r1's z1 and z2", seen)
	}
	h.closeIn(t, laZ1, 2) // 2 = low × 2: not below the low edge, still wide
	if seen := asks(t, laVIP, 40); !within(seen, laZ1, laZ2) || !reached(seen, laZ2) {
		t.Fatalf("2 open on z1 (between the edges, after widening): connects went to %v; want z1 and z2", seen)
	}
	h.closeIn(t, laZ1, 1) // below the low edge: narrow
	if seen := asks(t, laVIP, 40); !within(seen, laZ1) {
		t.Fatalf("1 open on z1 (below the low edge): connects went to %v; want z1 only", seen)
	}
	for h.in(laZ1)+h.in(laZ2) <= 8 { // r1 up to its high edge: z1 widens, r1 does not
		if b := h.open(t, laVIP); slices.Contains(laR2, b) {
			t.Fatalf("with %d open in r1 (at most 8) a connection went to %s in r2", h.in(laZ1)+h.in(laZ2)-1, b)
		}
	}
	wantCount(t, in, h, append(laZ1, laZ2...), "la", "r1")
	if seen := asks(t, laVIP, 40); !reached(seen, laR2) {
		t.Fatalf("9 open in r1 (above 8): connects went to %v; want r2 reached", seen)
	}
	h.closeAll()
	for _, node := range [][]string{{"r1", "z1"}, {"r1", "z2"}, {"r1"}, {"r2", "z3"}, {"r2"}} {
		if c := nodeState(t, in, "la", node...).Count; c != 0 {
			t.Fatalf("all closed: %v counts %d", node, c)
		}
	}
	if seen := asks(t, laVIP, 40); !within(seen, laZ1) {
		t.Fatalf("all closed: connects went to %v; want z1 only", seen)
	}
}

// TestLoadAwareStopsAtFailoverLimit: with failover_limit region the
// candidates never leave r1, however loaded z1 and r1 are.
func TestLoadAwareStopsAtFailoverLimit(t *testing.T) {
	kerneltest.RequireRoot(t)
	_, in := install(t, laTopology("region"), laSource)
	h := held{}
	defer h.closeAll()
	for range 12 {
		if b := h.open(t, laVIP); slices.Contains(laR2, b) {
			t.Fatalf("a connection went to %s in r2, beyond failover_limit region", b)
		}
	}
	if seen := asks(t, laVIP, 40); !within(seen, laZ1, laZ2) || !reached(seen, laZ2) {
		t.Fatalf("12 open in r1 (above 8): connects went to %v; want z1 and z2, never r2", seen)
	}
	if v := nodeState(t, in, "la", "r1"); v.Wide != 0 {
		t.Fatalf("r1 turned wide (count %d): the limit stops the walk before its state is read", v.Count)
	}
}

// TestLoadAwareCountsAcrossUpdates: the counts of connections open during
// updates stay with their nodes: an update that rewrites the service
// keeps z1 wide; one that removes z2 while connections to it are open
// leaves z2's count to fall to exactly 0 as they close (no underflow), and
// drops its entry at a later update; another load-aware service with the
// same localities keeps its own counts throughout. After closing
// everything, the connects are local again.
func TestLoadAwareCountsAcrossUpdates(t *testing.T) {
	kerneltest.RequireRoot(t)
	const otherVIP = "127.77.25.2:80"
	other := laService("other", otherVIP, laEndpoints(), "")
	top := &shared.Topology{Services: []shared.ServiceSpec{laService("la", laVIP, laEndpoints(), ""), other}}
	kerneltest.Backends(t, backendsOf(laTopology("")))
	in := setup(t, mustBuild(t, top, 1), laSource)
	h, ho := held{}, held{}
	defer h.closeAll()
	defer ho.closeAll()
	for range 3 {
		ho.open(t, otherVIP)
	}
	for tries := 0; h.in(laZ2) < 2; tries++ { // z1 wide (5), then two held on z2: r1 (7) stays narrow
		if b := h.open(t, laVIP); slices.Contains(laZ1, b) && h.in(laZ1) > 5 {
			h.close(t, b)
		}
		if tries > 200 {
			t.Fatalf("no connection to z2 in 200 with %d open on z1", h.in(laZ1))
		}
	}
	wantCount(t, in, h, laZ1, "la", "r1", "z1")

	eps := laEndpoints()
	eps["127.0.25.7:9025"] = [2]string{"r2", "z3"}
	kerneltest.Backends(t, []string{"127.0.25.7:9025"})
	top.Services[0] = laService("la", laVIP, eps, "")
	applyTop(t, in, top, 2)
	wantCount(t, in, h, laZ1, "la", "r1", "z1")
	wantCount(t, in, h, laZ2, "la", "r1", "z2")
	if seen := asks(t, laVIP, 40); !within(seen, laZ1, laZ2) || !reached(seen, laZ2) {
		t.Fatalf("after an update, %d open on z1: connects went to %v; want z1 and z2", h.in(laZ1), seen)
	}

	for _, a := range laZ2 {
		delete(eps, a)
	}
	top.Services[0] = laService("la", laVIP, eps, "")
	applyTop(t, in, top, 3)
	settle(in)
	applyTop(t, in, top, 4) // z2 left every tree, and the grace period of the last one that had it ended
	wantCount(t, in, h, laZ2, "la", "r1", "z2")
	h.closeIn(t, laZ2, 0)
	wantCount(t, in, h, laZ2, "la", "r1", "z2")
	wantCount(t, in, h, laZ1, "la", "r1")
	top.Services[0].Endpoints = top.Services[0].Endpoints[1:] // another change: the sweep runs
	applyTop(t, in, top, 5)
	var v bpf.WidenVal
	k := bpf.WidenKey{Svc: max(shared.Label("la"), 1)}
	k.Path = widenStep(widenStep(0, shared.Label("region"), shared.Label("r1")), shared.Label("zone"), shared.Label("z2"))
	if err := in.k.objs.LtWiden.Lookup(&k, &v); err == nil {
		t.Fatalf("z2's count is still there (%+v) with no tree naming it and no connection open", v)
	}
	wantCount(t, in, ho, laZ1, "other", "r1", "z1")
	wantCount(t, in, ho, append(laZ1, laZ2...), "other", "r1")

	h.closeAll()
	ho.closeAll()
	for _, svc := range []string{"la", "other"} {
		if c := nodeState(t, in, svc, "r1").Count; c != 0 {
			t.Fatalf("all closed: %s r1 counts %d", svc, c)
		}
	}
	if seen := asks(t, laVIP, 40); !within(seen, laZ1[1:]) {
		t.Fatalf("all closed: connects went to %v; want z1's endpoint", seen)
	}
}

// applyTop builds top at generation gen and applies it.
func applyTop(t *testing.T, in *Installer, top *shared.Topology, gen uint64) {
	t.Helper()
	if _, err := in.Apply(mustBuild(t, top, gen)); err != nil {
		t.Fatal(err)
	}
}

// settle waits for the grace period of the regions retired last.
func settle(in *Installer) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if n := len(in.retired); n > 0 {
		in.grace.wait(in.retired[n-1].after)
	}
}

// TestWidenConstantsMatchHeader: the loader's widening constants are
// bpf/lib/widen.h's.
func TestWidenConstantsMatchHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/lib/widen.h")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"LT_WIDEN_LEAVES": widenLeaves, "LT_WIDEN_ROOT": uint64(widenRoot)} {
		m := regexp.MustCompile(`(?m)^#define ` + name + `\s+(0x[0-9a-f]+|[0-9]+)(U|ULL)?\b`).FindSubmatch(h)
		if m == nil {
			t.Fatalf("no #define %s in widen.h", name)
		}
		got, err := strconv.ParseUint(string(m[1]), 0, 64)
		if err != nil || got != want {
			t.Errorf("%s = %s in widen.h, %#x in loader/widen.go", name, m[1], want)
		}
	}
}

// TestLoadAwareUDPRepointed: an unconnected UDP socket is counted on the
// path of the backend its datagrams go to, keeps that backend while it is
// a candidate of the widened range, and moves with its count when it stops
// being one: sent to z2 while z1 is wide, its datagrams stay on that
// backend while z1 stays wide; after z1 narrowed the next goes to z1, and
// z2's count is given back; closing it leaves every count at 0.
func TestLoadAwareUDPRepointed(t *testing.T) {
	kerneltest.RequireRoot(t)
	_, in := install(t, laTopology(""), laSource)
	h := held{}
	defer h.closeAll()
	for range 5 {
		h.open(t, laVIP)
	}
	var pc net.PacketConn
	var first string
	for tries := 0; pc == nil; tries++ { // z1 is wide: a socket's first datagram may go to z2
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if first = udpAsk(t, c); slices.Contains(laZ2, first) {
			pc = c
		} else {
			c.Close()
		}
		if tries > 200 {
			t.Fatal("no datagram went to z2 while z1 was wide")
		}
	}
	defer pc.Close()
	for range 10 { // still wide: z2 is still a candidate, and the socket keeps its backend
		if b := udpAsk(t, pc); b != first {
			t.Fatalf("z1 still wide: the socket's datagram went to %s, not to its backend %s", b, first)
		}
	}
	if c := nodeState(t, in, "la", "r1", "z2").Count; c != 1 {
		t.Fatalf("a UDP socket sent to z2: z2 counts %d, want 1", c)
	}
	h.closeAll() // z1 at 0: narrow at the next evaluation
	if b := udpAsk(t, pc); !slices.Contains(laZ1, b) {
		t.Fatalf("z1 narrow: the socket's next datagram went to %s, want z1", b)
	}
	if z1, z2 := nodeState(t, in, "la", "r1", "z1").Count, nodeState(t, in, "la", "r1", "z2").Count; z1 != 1 || z2 != 0 {
		t.Fatalf("the socket moved to z1: z1 counts %d, z2 %d; want 1 and 0", z1, z2)
	}
	pc.Close()
	if c := nodeState(t, in, "la", "r1").Count; c != 0 {
		t.Fatalf("all closed: r1 counts %d", c)
	}
}

// udpAsk sends a datagram to the VIP on c and returns the backend that
// answered (its address is the reply).
func udpAsk(t *testing.T, c net.PacketConn) string {
	t.Helper()
	vip, err := net.ResolveUDPAddr("udp4", laVIP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo([]byte("?"), vip); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _, err := c.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// TestLoadAwareCountsAcrossRestart: an agent restarted on its pins while
// connections are open finds their counts (the programs kept serving with
// them), keeps every entry its installed tree names, those at 0 too (the
// first sweep takes every entry as an orphan, and a named one is live),
// and the closes that follow bring every count to 0.
func TestLoadAwareCountsAcrossRestart(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, backendsOf(laTopology("")))
	cg, dir := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "lt")
	t.Cleanup(func() { Uninstall("", dir) })
	tree := mustBuild(t, laTopology(""), 1)
	first, err := Open(Config{Locality: laSource, BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Apply(tree); err != nil {
		t.Fatal(err)
	}
	if err := first.Attach(cg); err != nil {
		t.Fatal(err)
	}
	h := held{}
	defer h.closeAll()
	for range 5 {
		h.open(t, laVIP)
	}
	first.Close()
	second, err := Open(Config{Locality: laSource, BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.Attach(cg); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Apply(mustBuild(t, laTopology(""), 2)); err != nil {
		t.Fatal(err)
	}
	wantCount(t, second, h, laZ1, "la", "r1", "z1")
	for _, node := range [][]string{{"r1", "z2"}, {"r2", "z3"}, {"r2"}} {
		if c := nodeState(t, second, "la", node...).Count; c != 0 {
			t.Fatalf("after the restart %v counts %d, want 0", node, c)
		}
	}
	if seen := asks(t, laVIP, 40); !within(seen, laZ1, laZ2) || !reached(seen, laZ2) {
		t.Fatalf("after the restart, 5 open on z1: connects went to %v; want z1 and z2", seen)
	}
	h.closeAll()
	if c := nodeState(t, second, "la", "r1").Count; c != 0 {
		t.Fatalf("all closed after the restart: r1 counts %d", c)
	}
}

// TestReplaceSocketsReplacesCounts: an agent that must replace the pinned
// sockets map (another --max-sockets) replaces the load-aware and the least_connections counts with
// it, and the re-adopted load-aware tree gets its entries in the new
// counts map at the first Apply.
func TestReplaceSocketsReplacesCounts(t *testing.T) {
	kerneltest.RequireRoot(t)
	dir := filepath.Join(kerneltest.BPFFS(t), "lt")
	t.Cleanup(func() { Uninstall("", dir) })
	first, err := Open(Config{BPFFS: dir, Locality: laSource, Capacity: Capacity{Sockets: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Apply(mustBuild(t, laTopology(""), 1)); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second, err := Open(Config{BPFFS: dir, Locality: laSource, Capacity: Capacity{Sockets: 1 << 11}, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !slices.Contains(second.k.replaced, bpf.MapSocks) || !slices.Contains(second.k.replaced, bpf.MapWiden) || !slices.Contains(second.k.replaced, bpf.MapConns) {
		t.Fatalf("replaced %v; want the sockets map, the load-aware counts and the least_connections counts together", second.k.replaced)
	}
	if _, err := second.Apply(mustBuild(t, laTopology(""), 2)); err != nil {
		t.Fatal(err)
	}
	if v := nodeState(t, second, "la", "r1", "z1"); v.Count != 0 {
		t.Fatalf("the new counts map: z1 counts %d", v.Count)
	}
}

// TestLoadAwareCloseTakesBackWhatItAdded: a connection counted while a
// node of its path had no entry (as in the moment a replaced counts map
// is filled) is given back only to the nodes it was counted on: after the
// entry is created, the close leaves it at 0, not -1.
func TestLoadAwareCloseTakesBackWhatItAdded(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := laTopology("")
	_, in := install(t, top, laSource)
	r1 := bpf.WidenKey{Svc: max(shared.Label("la"), 1), Path: widenStep(0, shared.Label("region"), shared.Label("r1"))}
	if err := in.k.objs.LtWiden.Delete(&r1); err != nil {
		t.Fatal(err)
	}
	h := held{}
	defer h.closeAll()
	h.open(t, laVIP)
	if err := in.adoptCounts(); err != nil { // creates r1's entry again, count 0
		t.Fatal(err)
	}
	h.closeAll()
	for _, node := range [][]string{{"r1"}, {"r1", "z1"}} {
		if c := nodeState(t, in, "la", node...).Count; c != 0 {
			t.Fatalf("closed: %v counts %d, want 0", node, c)
		}
	}
}
