package kernel

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/loctree/loctree/bpf"
	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// lcPool are the backends of the least_connections service below.
func lcPool() []string {
	var out []string
	for i := range 6 {
		out = append(out, fmt.Sprintf("127.0.21.%d:9300", i+1))
	}
	return out
}

// countedTopology is a service with a policy that counts connections
// (least_connections, least_request) over the pool's backends picked by
// index, all candidates for the source (one zone).
func countedTopology(policy string, idx ...int) *shared.Topology {
	pool := lcPool()
	spec := shared.ServiceSpec{Name: "lcm", VIP: "127.77.2.1:80", Scopes: []string{"region", "zone"}, Policy: policy}
	for _, i := range idx {
		spec.Endpoints = append(spec.Endpoints, ep(pool[i], "r1", "z1"))
	}
	return &shared.Topology{Services: []shared.ServiceSpec{spec}}
}

// openConns opens n connections to the VIP, keeps them open and counts
// them per backend (each backend says its address).
func openConns(t *testing.T, n int, open map[string][]net.Conn) {
	t.Helper()
	for range n {
		c, err := net.DialTimeout("tcp", "127.77.2.1:80", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		who, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		open[string(who)] = append(open[string(who)], c)
	}
}

// checkConns compares the kernel's count of every pool backend with the
// connections the test holds open to it.
func checkConns(t *testing.T, in *Installer, open map[string][]net.Conn, when string) {
	t.Helper()
	for _, b := range lcPool() {
		if got := backendConns(t, in, backendKey(b)); got != uint64(len(open[b])) {
			t.Fatalf("%s: %s has %d open connections, the kernel counts %d", when, b, len(open[b]), got)
		}
	}
}

func backendKey(addr string) bpf.Backend {
	ap := netip.MustParseAddrPort(addr)
	b := bpf.Backend{Family: 4, Port: ap.Port()<<8 | ap.Port()>>8}
	a4 := ap.Addr().As4()
	b.Addr[0] = uint32(a4[0]) | uint32(a4[1])<<8 | uint32(a4[2])<<16 | uint32(a4[3])<<24
	return b
}

// TestLeastConnectionsFollowEndpoints: connections opened before and
// after Applies that move and resize the service stay counted on the
// endpoint they went to (not on the index it had), and closing all of
// them in random order brings every count back to exactly 0; for
// least_connections and for least_request, which the kernel runs alike.
func TestLeastConnectionsFollowEndpoints(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, lcPool())
	for _, policy := range []string{"least_connections", "least_request"} {
		t.Run(policy, func(t *testing.T) { followEndpoints(t, policy) })
	}
}

func followEndpoints(t *testing.T, policy string) {
	in := setup(t, mustBuild(t, countedTopology(policy, 0, 1, 2), 1), shared.Locality{"region": "r1", "zone": "z1"})
	open := map[string][]net.Conn{}
	defer func() {
		for _, cs := range open {
			for _, c := range cs {
				c.Close()
			}
		}
	}()
	openConns(t, 30, open)
	checkConns(t, in, open, "generation 1")
	steps := [][]int{{3, 1, 2, 4}, {0, 4, 5}, {5}, {2, 0, 1, 3, 4, 5}}
	for g, idx := range steps {
		if _, err := in.Apply(mustBuild(t, countedTopology(policy, idx...), uint64(g+2))); err != nil {
			t.Fatal(err)
		}
		checkConns(t, in, open, fmt.Sprintf("after Apply %d", g+2))
		openConns(t, 30, open)
		checkConns(t, in, open, fmt.Sprintf("generation %d", g+2))
	}
	var all []net.Conn
	for b, cs := range open {
		all = append(all, cs...)
		delete(open, b)
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, c := range all {
		c.Close()
	}
	kerneltest.Eventually(t, 5*time.Second, "counts back to 0 after closing every connection", func() error {
		for _, b := range lcPool() {
			if got := backendConns(t, in, backendKey(b)); got != 0 {
				return fmt.Errorf("%s still counts %d", b, got)
			}
		}
		return nil
	})
	openConns(t, spreadConns, open)
	spread(t, in, open)
}

// spreadConns connections are opened from zero counts for spread.
const spreadConns = 600

// spread checks the balance of spreadConns connections over the six
// backends, opened from zero counts: with two random choices the most and
// the least loaded backend stay within 11 connections, however many are
// open (the d-choice bound: max − average grows as ln ln n / ln d), where
// picking one backend at random spreads them over sqrt(n)·6. Simulated,
// 600 connections, 60,000 runs each: two independent draws (least_request,
// as Envoy's) exceed 10 with probability 1.7e-5 and never exceeded 11; two
// distinct draws (least_connections) never exceeded 7; one random draw
// stays within 11 in 3.5 % of the runs. (With 60 connections and a bound
// of 4, as this test had, two independent draws failed 3 % of the runs:
// CI saw 7 to 12.)
func spread(t *testing.T, in *Installer, open map[string][]net.Conn) {
	t.Helper()
	lo, hi := uint64(1<<63), uint64(0)
	for _, b := range lcPool() {
		n := backendConns(t, in, backendKey(b))
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 11 {
		t.Fatalf("%d connections: open connections per backend range from %d to %d", spreadConns, lo, hi)
	}
}

// TestLeastConnectionsTwoDistinct: with two candidates, least_connections'
// P2C compares both every time (two distinct draws), so the endpoint with
// 1,000 open connections is never picked over the idle one.
// least_request draws twice independently, as Envoy's
// unweightedHostPickNChoices (least_request_lb.cc at 3b0bcb125b34), so the
// busy one wins when drawn twice: 1/4 of the picks (chi-square, p = 1e-5).
func TestLeastConnectionsTwoDistinct(t *testing.T) {
	kerneltest.RequireRoot(t)
	for _, policy := range []string{"least_connections", "least_request"} {
		t.Run(policy, func(t *testing.T) { twoDistinct(t, policy) })
	}
}

func twoDistinct(t *testing.T, policy string) {
	tree := mustBuild(t, countedTopology(policy, 0, 1), 1)
	in, err := Open(Config{Locality: shared.Locality{"region": "r1", "zone": "z1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Apply(tree); err != nil {
		t.Fatal(err)
	}
	busy, idle := backendKey(lcPool()[0]), backendKey(lcPool()[1])
	if err := in.k.objs.LtConns.Put(&busy, uint64(1000)); err != nil {
		t.Fatal(err)
	}
	kl := newKernelLookup(t, in)
	svc, _ := tree.Service("lcm")
	args := bpftest.NewArgs(FrontendOf(svc.VIP()), sourceLabels(svc, shared.Locality{"region": "r1", "zone": "z1"}), 0)
	busyPicks := 0
	for i := range 1000 {
		out := kl.lookup(t, args)
		var ep bpf.Endpoint
		if err := in.k.objs.LtEndpoints.Lookup(out.Pick, &ep); err != nil {
			t.Fatal(err)
		}
		switch got := backendOf(ep); {
		case got == busy && policy == "least_request":
			busyPicks++
		case got != idle:
			t.Fatalf("pick %d: the endpoint with 1,000 connections over the idle one (%+v)", i, got)
		}
	}
	if d := float64(busyPicks) - 250; policy == "least_request" && d*d/250+d*d/750 > chi2Crit[1] {
		t.Fatalf("%s: %d of 1000 picks to the busy endpoint, want Envoy's 1/4", policy, busyPicks)
	}
}
