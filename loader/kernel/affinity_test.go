package kernel

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// The consistent_hash kernel tests follow Kubernetes' sessionAffinity:
// ClientIP as kube-proxy and Cilium implement it: a client stays on its
// backend while the affinity lasts (Cilium bpf/lib/lb.h
// __lb4_affinity_backend_id: sticky for [last_used, last_used + timeout),
// each use refreshes last_used), and a backend that is gone is not reused
// (the same function drops the entry when the backend no longer exists).

const affVIP = "127.77.12.1:80"

var affSource = shared.Locality{"zone": "z1"}

// affTopology is one consistent_hash service on affVIP with the given
// endpoints (addresses → zone) and timeout.
func affTopology(timeout uint32, eps map[string]string) *shared.Topology {
	spec := shared.ServiceSpec{Name: "aff", VIP: affVIP, Scopes: []string{"zone"}, Policy: "consistent_hash",
		SessionAffinity: &shared.SessionAffinitySpec{TimeoutSeconds: &timeout}}
	for a, z := range eps {
		spec.Endpoints = append(spec.Endpoints, shared.EndpointSpec{Address: a, Locality: shared.Locality{"zone": z}})
	}
	return &shared.Topology{Services: []shared.ServiceSpec{spec}}
}

// affPool is n endpoint addresses in zone z1, from 127.0.12.first.
func affPool(first, n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("127.0.12.%d:9400", first+i)] = "z1"
	}
	return out
}

// client is a pod: a goroutine on an OS thread in a network namespace of
// its own, inside the test's cgroup.
type client struct {
	do     chan func()
	cookie uint64 // its netns cookie
}

func newClient(t *testing.T) *client {
	t.Helper()
	c := &client{do: make(chan func())}
	ready := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in its netns
		ready <- kerneltest.EnterNewNetns()
		for f := range c.do {
			f()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(c.do) })
	c.run(func() { c.cookie = netnsCookie(t) })
	return c
}

// run runs f on the client's thread.
func (c *client) run(f func()) {
	done := make(chan struct{})
	c.do <- func() { f(); close(done) }
	<-done
}

// pick connects a UDP socket of the client to vip and returns the backend
// the kernel chose for it (from the socket's entry in lt_socks).
func (c *client) pick(t *testing.T, in *Installer) string {
	t.Helper()
	var out string
	var err error
	c.run(func() { out, err = udpPick(in, affVIP) })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func udpPick(in *Installer, vip string) (string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	ap := netip.MustParseAddrPort(vip)
	if err := connectRetry(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return "", fmt.Errorf("connect %s: %w", vip, err)
	}
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return "", err
	}
	var s bpf.Sock
	if err := in.k.objs.LtSocks.Lookup(&cookie, &s); err != nil {
		return "", fmt.Errorf("socket of the connect to %s: %w", vip, err)
	}
	return backendString(s.Backend), nil
}

func netnsCookie(t *testing.T) uint64 {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer unix.Close(fd)
	v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		t.Error(err)
	}
	return v
}

func backendString(b bpf.Backend) string {
	var a [4]byte
	binary.NativeEndian.PutUint32(a[:], b.Addr[0])
	return netip.AddrPortFrom(netip.AddrFrom4(a), b.Port<<8|b.Port>>8).String()
}

// modelPick is the endpoint the Go model of bpf/lib/affinity.h picks for a
// client with no affinity: jump hash of (client, service) in the range.
func modelPick(tree *shared.Tree, client uint64) string {
	s, _ := tree.Service("aff")
	r := s.Lookup(affSource)
	i := r.Lo + jump(affinityHash(client, FrontendOf(s.VIP())), r.Hi-r.Lo)
	return tree.Endpoint(i).Addr.String()
}

func affSetup(t *testing.T, top *shared.Topology) (*Installer, *shared.Tree) {
	t.Helper()
	kerneltest.RequireRoot(t)
	tree := mustBuild(t, top, 1)
	return setup(t, tree, affSource), tree
}

func apply(t *testing.T, in *Installer, top *shared.Topology, gen uint64) *shared.Tree {
	t.Helper()
	tree := mustBuild(t, top, gen)
	if _, err := in.Apply(tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestAffinityOneClientOneBackend: every connection of one client (the
// test's own netns) lands on one backend, over real TCP connections.
func TestAffinityOneClientOneBackend(t *testing.T) {
	pool := affPool(1, 8)
	affSetup(t, affTopology(60, pool))
	kerneltest.Backends(t, keys(pool))
	seen := map[string]int{}
	for range 40 {
		got, err := kerneltest.Ask(affVIP)
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	if len(seen) != 1 {
		t.Fatalf("one client reached %d backends %v, want 1", len(seen), seen)
	}
}

// TestAffinityClientsSpread: clients in their own netns each keep one
// backend, together they use several, and each one's backend is the one
// the Go model of the kernel's jump hash picks for its netns cookie.
func TestAffinityClientsSpread(t *testing.T) {
	in, tree := affSetup(t, affTopology(60, affPool(1, 8)))
	used := map[string]int{}
	for range 24 {
		c := newClient(t)
		first := c.pick(t, in)
		if want := modelPick(tree, c.cookie); first != want {
			t.Fatalf("client %d: kernel picked %s, the model %s", c.cookie, first, want)
		}
		for range 5 {
			if got := c.pick(t, in); got != first {
				t.Fatalf("client %d moved from %s to %s", c.cookie, first, got)
			}
		}
		used[first]++
	}
	if len(used) < 4 { // 24 clients on 8 backends: P(< 4 used) < 1e-9
		t.Fatalf("24 clients used only %d backends: %v", len(used), used)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// clientsOn gives n clients their first backend.
func clientsOn(t *testing.T, in *Installer, n int) ([]*client, []string) {
	cs, on := make([]*client, n), make([]string, n)
	for i := range cs {
		cs[i] = newClient(t)
		on[i] = cs[i].pick(t, in)
	}
	return cs, on
}

// moved asks every client again and returns how many changed backend;
// it fails when a client that did not have to move did, or when one
// landed on a backend in gone.
func moved(t *testing.T, in *Installer, cs []*client, on []string, gone string) int {
	t.Helper()
	n := 0
	for i, c := range cs {
		got := c.pick(t, in)
		switch {
		case got == gone:
			t.Fatalf("client %d reused %s, which left its candidates", i, gone)
		case on[i] != gone && got != on[i]:
			t.Fatalf("client %d moved from %s to %s, but %s is still a candidate", i, on[i], got, on[i])
		case got != on[i]:
			n++
		}
	}
	return n
}

// TestAffinityEndpointLeaves: when one of K endpoints leaves the service,
// or leaves the source's range (its zone changes), only the clients on it
// move, and none comes back to it; when one joins, nobody moves
// (kube-proxy and Cilium keep an affinity while its backend exists). The
// endpoint that leaves sits in the middle of the sorted array, so the
// update shifts the index of every endpoint after it.
func TestAffinityEndpointLeaves(t *testing.T) {
	const k, clients = 8, 48
	pool := affPool(1, k)
	in, _ := affSetup(t, affTopology(60, pool))
	cs, on := clientsOn(t, in, clients)
	gone := "127.0.12.4:9400"
	want := 0
	for _, b := range on {
		if b == gone {
			want++
		}
	}
	pool[gone] = "z2" // leaves the range of a z1 source
	apply(t, in, affTopology(60, pool), 2)
	if n := moved(t, in, cs, on, gone); n != want {
		t.Fatalf("%d of %d clients moved, want the %d on %s", n, clients, want, gone)
	}
	t.Logf("endpoint left the range: %d of %d clients moved (%.3f; 1/K = %.3f)", want, clients, float64(want)/clients, 1.0/k)
	on = make([]string, clients)
	for i, c := range cs {
		on[i] = c.pick(t, in)
	}
	delete(pool, "127.0.12.6:9400")
	apply(t, in, affTopology(60, pool), 3)
	want = 0
	for _, b := range on {
		if b == "127.0.12.6:9400" {
			want++
		}
	}
	if n := moved(t, in, cs, on, "127.0.12.6:9400"); n != want {
		t.Fatalf("endpoint removed: %d of %d clients moved, want the %d on it", n, clients, want)
	}
	t.Logf("endpoint removed: %d of %d clients moved (%.3f)", want, clients, float64(want)/clients)
	for i, c := range cs {
		on[i] = c.pick(t, in)
	}
	pool["127.0.12.2:9401"] = "z1" // joins between two others
	apply(t, in, affTopology(60, pool), 4)
	if n := moved(t, in, cs, on, ""); n != 0 {
		t.Fatalf("endpoint joined: %d clients moved, want 0", n)
	}
}

// TestAffinityTimeout: within the timeout a client keeps its backend even
// when the hash would now pick another; after the timeout, with no
// connection in between, it gets the hash's pick (Kubernetes'
// sessionAffinityConfig.clientIP.timeoutSeconds; Cilium expires an entry
// at last_used + timeout).
func TestAffinityTimeout(t *testing.T) {
	pool := affPool(1, 4)
	in, tree := affSetup(t, affTopology(1, pool))
	c := newClient(t)
	first := c.pick(t, in)
	if want := modelPick(tree, c.cookie); first != want {
		t.Fatalf("kernel picked %s, the model %s", first, want)
	}
	// Add endpoints until the hash picks another backend for this client.
	// They sort before the others, so every one shifts the backends under
	// the jump hash's buckets: appended ones would leave a client in its
	// bucket with probability 4/68 after 64 of them, as jump hash does.
	gen := uint64(1)
	for i := 0; modelPick(tree, c.cookie) == first; i++ {
		if i == 64 {
			t.Fatal("64 more endpoints and the hash still picks the same backend")
		}
		pool[fmt.Sprintf("127.0.11.%d:9400", 200-i)] = "z1"
		gen++
		tree = apply(t, in, affTopology(1, pool), gen)
	}
	for range 3 {
		if got := c.pick(t, in); got != first {
			t.Fatalf("within the timeout: %s, want the affinity's %s", got, first)
		}
		time.Sleep(400 * time.Millisecond) // each use refreshes the affinity
	}
	time.Sleep(1100 * time.Millisecond)
	if got, want := c.pick(t, in), modelPick(tree, c.cookie); got != want {
		t.Fatalf("after the timeout: %s, want the hash's %s", got, want)
	}
}

// TestAffinityRemovedBackendNotReused: a client whose backend is removed
// goes elsewhere, and stays there when the backend comes back within the
// timeout.
func TestAffinityRemovedBackendNotReused(t *testing.T) {
	pool := affPool(1, 4)
	in, _ := affSetup(t, affTopology(60, pool))
	c := newClient(t)
	first := c.pick(t, in)
	delete(pool, first)
	apply(t, in, affTopology(60, pool), 2)
	second := c.pick(t, in)
	if second == first {
		t.Fatalf("removed backend %s reused", first)
	}
	pool[first] = "z1"
	apply(t, in, affTopology(60, pool), 3)
	if got := c.pick(t, in); got != second {
		t.Fatalf("after %s came back: %s, want the client's new backend %s", first, got, second)
	}
}

// TestAffinityTimeoutChangeInstalled: a change of only the timeout reaches
// the kernel, by Apply and by ApplyServices.
func TestAffinityTimeoutChangeInstalled(t *testing.T) {
	pool := affPool(1, 3)
	in, _ := affSetup(t, affTopology(60, pool))
	check := func(want uint32) {
		t.Helper()
		for _, v := range frontends(t, in) {
			if v.AffinityTimeout != want {
				t.Fatalf("installed timeout %d, want %d", v.AffinityTimeout, want)
			}
		}
	}
	check(60)
	apply(t, in, affTopology(2, pool), 2)
	check(2)
	if _, err := in.ApplyServices(mustBuild(t, affTopology(7, pool), 3), []string{"aff"}); err != nil {
		t.Fatal(err)
	}
	check(7)
}
