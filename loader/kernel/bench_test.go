package kernel

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// benchLocality is the source of the benchmarks' connections.
var benchLocality = shared.Locality{"region": "r0", "zone": "z0", "subzone": "s0"}

// bigService has n endpoints over 10 regions × 10 zones × n/100 subzones;
// only the two in the source's subzone (127.0.0.1 and 127.0.0.2) listen.
func bigService(name, vip string, n, port int) shared.ServiceSpec {
	s := shared.ServiceSpec{Name: name, VIP: vip, Scopes: []string{"region", "zone", "subzone"}}
	subzones := max(n/100, 1)
	for i := range n {
		loc := shared.Locality{
			"region":  fmt.Sprintf("r%d", i%10),
			"zone":    fmt.Sprintf("z%d", i/10%10),
			"subzone": fmt.Sprintf("s%d", i/100%subzones),
		}
		if i >= 2 && loc["region"] == "r0" && loc["zone"] == "z0" && loc["subzone"] == "s0" {
			loc["subzone"] = "s-other" // keep the local subzone to the two listeners
		}
		addr := fmt.Sprintf("127.%d.%d.%d:%d", 1+i>>16, i>>8&0xff, i&0xff, port)
		if i < 2 {
			addr = fmt.Sprintf("127.0.0.%d:%d", i+1, port)
		}
		s.Endpoints = append(s.Endpoints, shared.EndpointSpec{Address: addr, Locality: loc})
	}
	return s
}

func mustBuild(tb testing.TB, top *shared.Topology, gen uint64) *shared.Tree {
	tb.Helper()
	tree, err := shared.Build(top, shared.BuildOptions{Generation: gen})
	if err != nil {
		tb.Fatal(err)
	}
	return tree
}

// acceptors accept and close connections on the two local backends.
func acceptors(tb testing.TB, port int) { acceptorsOn(tb, 2, port) }

// acceptorsOn accepts and closes connections on 127.0.0.1 to 127.0.0.n.
func acceptorsOn(tb testing.TB, n, port int) {
	for i := range n {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", i+1, port))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { // wait for the client's reset: no TIME_WAIT
					c.Read(make([]byte, 1))
					c.Close()
				}()
			}
		}()
	}
}

// sockets opens n TCP sockets in the cgroup dir (a socket keeps the cgroup
// it was created in) and moves the process back to home.
func sockets(b *testing.B, n int, dir, home string) []int {
	kerneltest.MoveTo(b, dir)
	defer kerneltest.MoveTo(b, home)
	fds := make([]int, n)
	for i := range fds {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		fds[i] = fd
	}
	return fds
}

// timedConnect returns how long connect(fd, to) took, then resets the
// connection (no TIME_WAIT).
func timedConnect(b *testing.B, fd int, to unix.Sockaddr) time.Duration {
	start := time.Now()
	err := connectRetry(fd, to)
	d := time.Since(start)
	if err != nil {
		b.Fatalf("connect: %v", err)
	}
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
	return d
}

// compareConnects interleaves connect() to the VIP from sockets in the
// cgroup with the programs and connect() to a backend from sockets in the
// root cgroup (no programs), alternating which goes first, so both see the
// same machine load. It reports ns/op for the VIP, direct-ns/op, the ratio
// of the means and the ratio of the medians (robust to preemption spikes on
// a busy machine).
func compareConnects(b *testing.B, cg string, vip unix.Sockaddr, directs ...unix.Sockaddr) {
	const batch = 128
	root := filepath.Dir(cg)
	var viaVIP, viaDirect []time.Duration
	for len(viaVIP) < b.N {
		b.StopTimer()
		plain, hooked := sockets(b, batch, root, cg), sockets(b, batch, cg, cg)
		b.StartTimer()
		for i := range batch {
			direct := directs[(len(viaDirect))%len(directs)]
			if i%2 == 0 {
				viaDirect = append(viaDirect, timedConnect(b, plain[i], direct))
				viaVIP = append(viaVIP, timedConnect(b, hooked[i], vip))
			} else {
				viaVIP = append(viaVIP, timedConnect(b, hooked[i], vip))
				viaDirect = append(viaDirect, timedConnect(b, plain[i], direct))
			}
		}
	}
	mv, md := mean(viaVIP), mean(viaDirect)
	b.ReportMetric(mv, "ns/op")
	b.ReportMetric(md, "direct-ns/op")
	b.ReportMetric(mv/md, "ratio")
	b.ReportMetric(median(viaVIP)/median(viaDirect), "p50-ratio")
}

func mean(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Nanoseconds()) / float64(len(ds))
}

func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Nanoseconds())
}

// attachedInstaller is an installer with its programs attached to a child cgroup,
// closed when the benchmark ends.
func attachedInstaller(b *testing.B) (*Installer, string) {
	kerneltest.RequireRoot(b)
	cg := kerneltest.Cgroup(b)
	in, err := Open(Config{Locality: benchLocality})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close() })
	if err := in.Attach(cg); err != nil {
		b.Fatal(err)
	}
	return in, cg
}

// BenchmarkConnect compares connect() through a VIP (programs attached,
// a service of n endpoints) with connect() to the backend from a socket
// without programs, interleaved. The ratio metric is VIP over direct. The
// spillover cases are the same service with Envoy's priority load
// (spilloverService): the kernel walks three trees and computes the loads
// on every connect. load_aware is the plain service with load_aware
// (loadAwareService): the widening check of the source's node, and a count
// on each level of the picked endpoint's path (its close gives it back
// after the timed connect).
func BenchmarkConnect(b *testing.B) {
	const port = 9300
	acceptors(b, port)
	in, cg := attachedInstaller(b)
	direct := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}
	vip := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 1}, Port: 80}
	spill := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 2}, Port: 80}
	dist := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 3}, Port: 80}
	netVIP := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 4}, Port: 80}
	locVIP := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 5}, Port: 80}
	netSpillVIP := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 6}, Port: 80}
	laVIP := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 7}, Port: 80}
	cluVIP := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 8}, Port: 80}
	clsVIP := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 9}, Port: 80}
	for i, n := range []int{10, 1000, 100000} {
		top := &shared.Topology{Services: []shared.ServiceSpec{bigService("big", "127.77.3.1:80", n, port)}}
		if n < 100000 { // both 100k services do not fit the default maps twice
			top.Services = append(top.Services, spilloverService("spill", "127.77.3.2:80", n, port),
				distributeBenchService("dist", "127.77.3.3:80", n, port), networkService("net", "127.77.3.4:80", n, port),
				localityService("loc", "127.77.3.5:80", n, port), networkSpillService("netspill", "127.77.3.6:80", n, port),
				loadAwareService("la", "127.77.3.7:80", n, port),
				clusterSpillService("cluspill", "127.77.3.8:80", n, port), classSpillService("clsspill", "127.77.3.9:80", n, port))
		}
		if _, err := in.Apply(mustBuild(b, top, uint64(i+1))); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, vip, direct) })
		if n < 100000 {
			b.Run(fmt.Sprintf("spillover/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, spill, direct) })
			b.Run(fmt.Sprintf("distribute/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, dist, direct) })
			b.Run(fmt.Sprintf("network_rule/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, netVIP, direct) })
			b.Run(fmt.Sprintf("spillover-locality/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, locVIP, direct) })
			b.Run(fmt.Sprintf("spillover-network/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, netSpillVIP, direct) })
			b.Run(fmt.Sprintf("load_aware/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, laVIP, direct) })
			b.Run(fmt.Sprintf("spillover-cluster/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, cluVIP, direct) })
			b.Run(fmt.Sprintf("spillover-classes/endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, clsVIP, direct) })
		}
	}
}

// BenchmarkConnectConsistentHash is BenchmarkConnect for consistent_hash
// beside random, in one run: one client (the benchmark's netns), so after
// its first connect every connect follows its session affinity (a lookup
// in lt_affinity, the backend checked in the range, last use refreshed).
func BenchmarkConnectConsistentHash(b *testing.B) {
	const port = 9300
	acceptors(b, port)
	in, cg := attachedInstaller(b)
	direct := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}
	vip := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 1}, Port: 80}
	gen := uint64(0)
	for _, n := range []int{10, 1000, 100000} {
		for _, policy := range []string{"random", "consistent_hash"} {
			s := bigService("big", "127.77.3.1:80", n, port)
			s.Policy = policy
			gen++
			if _, err := in.Apply(mustBuild(b, &shared.Topology{Services: []shared.ServiceSpec{s}}, gen)); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("endpoints=%d/policy=%s", n, policy), func(b *testing.B) { compareConnects(b, cg, vip, direct) })
		}
	}
}

// loadAwareService is bigService with load_aware's default band (2, 1):
// each connect is closed before the next, so the source's subzone (two
// endpoints) never holds more than 4 and never widens.
func loadAwareService(name, vip string, n, port int) shared.ServiceSpec {
	s := bigService(name, vip, n, port)
	s.LoadAware = &shared.LoadAwareSpec{}
	return s
}

// spilloverService is bigService with Envoy's priority load (factor 140,
// panic threshold 50), every 7th endpoint unhealthy and every 11th
// degraded outside the source's subzone, so all three trees have nodes
// on the walk; the two local endpoints are healthy, so priority 0 keeps
// all the load and every connect reaches a listener.
// networkService is bigService with network as its first scope and its
// endpoints on three networks, none of them the source's (benchLocality
// has none): every connect takes ztunnel's network rule, a miss at the
// root and a walk of the network tree to the two listeners.
func networkService(name, vip string, n, port int) shared.ServiceSpec {
	s := bigService(name, vip, n, port)
	s.Scopes = append([]string{"network"}, s.Scopes...)
	for i := range s.Endpoints {
		s.Endpoints[i].Locality["network"] = fmt.Sprintf("net-%d", i%3+1)
	}
	return s
}

func spilloverService(name, vip string, n, port int) shared.ServiceSpec {
	s := bigService(name, vip, n, port)
	of, threshold := uint32(140), uint32(50)
	s.Spillover = &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}
	for i := 2; i < n; i++ {
		switch e := &s.Endpoints[i]; {
		case i%7 == 0:
			e.Healthy = new(bool)
		case i%11 == 0:
			e.Degraded = true
		}
	}
	return s
}

// localityService is spilloverService where the source's subzone has no
// endpoint and its zone only the two listeners, each in a subzone of its
// own, with a failover rule (istiod then turns locality weighting on): a
// connect draws priority 0 (the zone) and then one of its two localities
// (bpf/lib/locality.h).
func localityService(name, vip string, n, port int) shared.ServiceSpec {
	s := spilloverService(name, vip, n, port)
	s.Failover = []shared.FailoverSpec{{From: "r0", To: "r1"}}
	for i := range s.Endpoints {
		switch loc := s.Endpoints[i].Locality; {
		case i < 2:
			loc["subzone"] = fmt.Sprintf("s-local-%d", i)
		case loc["region"] == "r0" && loc["zone"] == "z0":
			loc["zone"] = "z-other"
		}
	}
	return s
}

// networkSpillService is localityService with network first, the
// endpoints on three networks, and a source on none of them: a connect
// walks the three sets' trees and their other-network trees (Istio's
// failoverPriority network rule), and draws priority 0 (the other
// networks' r0/z0) and one of its two localities.
func networkSpillService(name, vip string, n, port int) shared.ServiceSpec {
	s := localityService(name, vip, n, port)
	s.Scopes = append([]string{"network"}, s.Scopes...)
	for i := range s.Endpoints {
		s.Endpoints[i].Locality["network"] = fmt.Sprintf("net-%d", i%3+1)
	}
	return s
}

// clusterSpillService is localityService with cluster before region and
// no failover rule (docs/FORMAT.md "Copies by the first scope", network_rule
// 3): the listeners have no cluster, as the source, the rest are in three
// clusters, so a connect also walks the copies of the other clusters one
// level and draws the zone's priority as localityService does.
func clusterSpillService(name, vip string, n, port int) shared.ServiceSpec {
	s := localityService(name, vip, n, port)
	s.Scopes, s.Failover = append([]string{"cluster"}, s.Scopes...), nil
	for i := 2; i < len(s.Endpoints); i++ {
		s.Endpoints[i].Locality["cluster"] = fmt.Sprintf("c-%d", i%3+1)
	}
	return s
}

// classSpillService is networkSpillService with cluster after network
// (docs/FORMAT.md "Classes before the locality"), the endpoints in two
// clusters of each network, and a source on no network or cluster: a
// connect walks the three sets' trees and three groups of copies (the
// classes of the other clusters on the source's network, the other
// networks' ranked copies, and their other clusters), and draws the
// other networks' other clusters' r0/z0 and one of its localities.
func classSpillService(name, vip string, n, port int) shared.ServiceSpec {
	s := networkSpillService(name, vip, n, port)
	s.Scopes = append([]string{"network", "cluster"}, s.Scopes[1:]...)
	for i := range s.Endpoints {
		s.Endpoints[i].Locality["cluster"] = fmt.Sprintf("c-%d", i%2)
	}
	return s
}

// distributeBenchService is spilloverService with five distribute rules:
// four whose from the source (r0/z0/s0) does not match, then r0/z0, whose
// one target is the source's subzone (its two listeners), so a connect
// tests five froms and draws a target.
func distributeBenchService(name, vip string, n, port int) shared.ServiceSpec {
	s := spilloverService(name, vip, n, port)
	for r := 1; r <= 4; r++ {
		s.Distribute = append(s.Distribute, shared.DistributeSpec{From: fmt.Sprintf("r%d", r), To: map[string]uint32{fmt.Sprintf("r%d", r): 100}})
	}
	s.Distribute = append(s.Distribute, shared.DistributeSpec{From: "r0/z0", To: map[string]uint32{"r0/z0/s0": 100}})
	return s
}

// spreadService is bigService with local endpoints in the source's subzone,
// 127.0.0.1 to 127.0.0.local, all listening: a connect picks among them.
func spreadService(name, vip string, n, local, port int) shared.ServiceSpec {
	s := bigService(name, vip, n, port)
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if e.Locality["region"] == "r0" && e.Locality["zone"] == "z0" {
			e.Locality["subzone"] = "s-other"
		}
	}
	for i := range local {
		s.Endpoints[i] = shared.EndpointSpec{Address: fmt.Sprintf("127.0.0.%d:%d", i+1, port),
			Locality: shared.Locality{"region": "r0", "zone": "z0", "subzone": "s0"}}
	}
	return s
}

// BenchmarkConnectSpread is BenchmarkConnect with 100 candidates, all
// listening, against direct connects spread over the same 100 endpoints:
// spreading connections over more backends costs by itself, so the fair
// control spreads too.
func BenchmarkConnectSpread(b *testing.B) {
	const port, local = 9302, 100
	var directs []unix.Sockaddr
	for i := range local {
		directs = append(directs, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, byte(i + 1)}, Port: port})
	}
	acceptorsOn(b, local, port)
	in, cg := attachedInstaller(b)
	vip := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 3}, Port: 80}
	for i, n := range []int{1000, 100000} {
		top := &shared.Topology{Services: []shared.ServiceSpec{spreadService("spread", "127.77.3.3:80", n, local, port)}}
		if _, err := in.Apply(mustBuild(b, top, uint64(i+1))); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) { compareConnects(b, cg, vip, directs...) })
	}
}

// manyServices is services × perService endpoints; service 0's endpoints
// get weight w.
func manyServices(services, perService int, w uint32) *shared.Topology {
	top := &shared.Topology{}
	for i := range services {
		s := bigService(fmt.Sprintf("svc-%04d", i), fmt.Sprintf("127.77.%d.%d:80", i/250, i%250+1), perService, 9400)
		if i == 0 {
			for j := range s.Endpoints {
				s.Endpoints[j].Weight = &w
			}
		}
		top.Services = append(top.Services, s)
	}
	return top
}

// BenchmarkApplyServiceChange applies a change of one 1,000-endpoint
// service in a tree of 100 such services (100,000 endpoints).
func BenchmarkApplyServiceChange(b *testing.B) {
	kerneltest.RequireRoot(b)
	in, err := Open(Config{Locality: benchLocality})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	trees := []*shared.Tree{mustBuild(b, manyServices(100, 1000, 1), 1), mustBuild(b, manyServices(100, 1000, 2), 2)}
	if _, err := in.Apply(trees[0]); err != nil {
		b.Fatal(err)
	}
	i := 1
	before := in.grace.next() - 1
	for b.Loop() {
		res, err := in.Apply(trees[i%2])
		if err != nil {
			b.Fatal(err)
		}
		if res.Rewritten != 1 {
			b.Fatalf("rewrote %d services, want 1", res.Rewritten)
		}
		i++
	}
	// Grace periods run in the background, one covering every region
	// retired before it began: report how many one change needed.
	b.ReportMetric(float64(in.grace.next()-1-before)/float64(b.N), "grace-periods/op")
}

// BenchmarkGracePeriod is one RCU grace period as the installer waits for
// it (a map-in-map update): what an Apply pays when it needs the space of
// regions retired a moment ago.
func BenchmarkGracePeriod(b *testing.B) {
	kerneltest.RequireRoot(b)
	r, err := newRCUSync()
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	for b.Loop() {
		if err := r.synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstall100k installs 100,000 endpoints across 1,000 services
// into empty maps. bigService gives every endpoint of a 100-endpoint
// service a zone of its own (211 tree nodes and 630 child-table slots per
// service), more than DefaultCapacity's nodes hold (it fits about 2.5
// entries per endpoint, twice): the maps are sized for the tree.
func BenchmarkInstall100k(b *testing.B) {
	kerneltest.RequireRoot(b)
	tree := mustBuild(b, manyServices(1000, 100, 1), 1)
	capacity := DefaultCapacity()
	capacity.Nodes = 1 << 21
	for b.Loop() {
		b.StopTimer()
		in, err := Open(Config{Locality: benchLocality, Capacity: capacity})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := in.Apply(tree)
		b.StopTimer()
		in.Close()
		if err != nil || res.Endpoints != 100000 {
			b.Fatalf("%+v %v", res, err)
		}
		b.StartTimer()
	}
}

// udpSinks receive and drop datagrams on the two local backends.
func udpSinks(tb testing.TB, port int) {
	for i := range 2 {
		pc, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.%d:%d", i+1, port))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 64)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
			}
		}()
	}
}

// udpSocket is an unconnected UDP socket created in the cgroup dir.
func udpSocket(b *testing.B, dir, home string) int {
	kerneltest.MoveTo(b, dir)
	defer kerneltest.MoveTo(b, home)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return fd
}

func timedSend(b *testing.B, fd int, to unix.Sockaddr) time.Duration {
	start := time.Now()
	err := sendtoRetry(fd, []byte("q"), to)
	d := time.Since(start)
	if err != nil {
		b.Fatalf("sendto: %v", err)
	}
	return d
}

// BenchmarkSendmsg compares sendto() on an unconnected UDP socket through a
// VIP (programs attached, a service of n endpoints; the socket keeps its
// backend, so after the first datagram no map is written) with sendto() to
// the backend from a socket without programs, interleaved. The ratio
// metric is VIP over direct.
func BenchmarkSendmsg(b *testing.B) {
	const port = 9301
	udpSinks(b, port)
	in, cg := attachedInstaller(b)
	direct := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}
	vip := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 2}, Port: 53}
	for i, n := range []int{10, 1000, 100000} {
		top := &shared.Topology{Services: []shared.ServiceSpec{bigService("dns", "127.77.3.2:53", n, port)}}
		if _, err := in.Apply(mustBuild(b, top, uint64(i+1))); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			plain, hooked := udpSocket(b, filepath.Dir(cg), cg), udpSocket(b, cg, cg)
			var viaVIP, viaDirect []time.Duration
			for j := 0; b.Loop(); j++ {
				if j%2 == 0 {
					viaDirect = append(viaDirect, timedSend(b, plain, direct))
					viaVIP = append(viaVIP, timedSend(b, hooked, vip))
				} else {
					viaVIP = append(viaVIP, timedSend(b, hooked, vip))
					viaDirect = append(viaDirect, timedSend(b, plain, direct))
				}
			}
			b.ReportMetric(mean(viaVIP), "vip-ns/op")
			b.ReportMetric(mean(viaDirect), "direct-ns/op")
			b.ReportMetric(mean(viaVIP)/mean(viaDirect), "ratio")
			b.ReportMetric(median(viaVIP)/median(viaDirect), "p50-ratio")
		})
	}
}

// BenchmarkOpen is the cost of Installer.Open with nothing pinned: loading
// and verifying the programs, creating the maps.
func BenchmarkOpen(b *testing.B) {
	kerneltest.RequireRoot(b)
	for b.Loop() {
		in, err := Open(Config{Locality: benchLocality})
		if err != nil {
			b.Fatal(err)
		}
		in.Close()
	}
}
