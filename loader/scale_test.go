package loader

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

// The scale test of issue 15: the real agent (Run, file source) with
// 100,000 endpoints over 1,000 services in a ~9 MB JSON topology, then
// random single-service changes; after each, connects through the VIP land
// only on the service's new endpoints. The latency from the file's change
// to the new service value in the kernel is measured per change.

const scalePort = 9700

var scaleLocality = shared.Locality{"region": "r0", "zone": "z0", "subzone": "s0"}

// scaleMesh is a topology kept as one JSON value per service, written as
// one file or, with dir, as a directory of one file per service.
type scaleMesh struct {
	path     string
	services [][]byte
	perSvc   int
	dir      bool
	buf      bytes.Buffer
}

func scaleVIP(s int) string { return fmt.Sprintf("127.77.%d.%d:80", s/250, s%250+1) }

// scaleEndpoints are the addresses of service s in version v (v = 0 for the
// first file; later versions never repeat an address).
func scaleEndpoints(s, v, n int) []string {
	out := make([]string, n)
	for i := range out {
		k := s*n + i
		if v == 0 {
			out[i] = fmt.Sprintf("127.%d.%d.%d:%d", 1+k>>16, k>>8&0xff, k&0xff, scalePort)
		} else {
			out[i] = fmt.Sprintf("127.%d.%d.%d:%d", 100+v%100, 1+v/100, i+1, scalePort)
		}
	}
	return out
}

func scaleServiceJSON(s int, addrs []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"name":"svc-%04d","vip":%q,"endpoints":[`, s, scaleVIP(s))
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":%q,"locality":{"region":"r%d","zone":"z%d","subzone":"s%d"}}`, a, i%3, i%9, i%27)
	}
	b.WriteString("]}")
	return b.Bytes()
}

func newScaleMesh(tb testing.TB, services, perSvc int, dir bool) *scaleMesh {
	m := &scaleMesh{path: filepath.Join(tb.TempDir(), "mesh.json"), perSvc: perSvc, dir: dir}
	if dir {
		m.path = tb.TempDir()
	}
	for s := range services {
		m.services = append(m.services, scaleServiceJSON(s, scaleEndpoints(s, 0, perSvc)))
		if dir {
			m.writeService(tb, s)
		}
	}
	if !dir {
		m.write(tb)
	}
	return m
}

// writeService replaces service s's file of a directory (write, rename).
func (m *scaleMesh) writeService(tb testing.TB, s int) {
	m.buf.Reset()
	m.buf.WriteString(`{"services":[`)
	m.buf.Write(m.services[s])
	m.buf.WriteString("]}\n")
	m.replace(tb, filepath.Join(m.path, fmt.Sprintf("svc-%04d.json", s)))
}

// write replaces the file, as config management does (write, rename).
func (m *scaleMesh) write(tb testing.TB) {
	m.buf.Reset()
	m.buf.WriteString(`{"services":[`)
	for i, s := range m.services {
		if i > 0 {
			m.buf.WriteString(",\n")
		}
		m.buf.Write(s)
	}
	m.buf.WriteString("]}\n")
	m.replace(tb, m.path)
}

func (m *scaleMesh) replace(tb testing.TB, path string) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, m.buf.Bytes(), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// scaleAgent is a running agent on a scale mesh and the pinned frontends
// map it writes, read back to see a change arrive in the kernel.
type scaleAgent struct {
	mesh      *scaleMesh
	frontends *ebpf.Map
	install   time.Duration // start to every service in the kernel
}

func startScaleAgent(tb testing.TB, mesh *scaleMesh) *scaleAgent {
	cg, dir := kerneltest.Cgroup(tb), filepath.Join(kerneltest.BPFFS(tb), "lt")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- Run(ctx, AgentConfig{Topology: mesh.path, Locality: scaleLocality, Cgroup: cg, BPFFS: dir,
			Watch: 10 * time.Millisecond, Capacity: kernel.Capacity{Services: 4096, Nodes: 1 << 18, Endpoints: 1 << 18}})
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("agent: %v", err)
		}
		kernel.Uninstall("", dir)
	})
	a := &scaleAgent{mesh: mesh}
	// One Apply publishes the services one after another: wait for all.
	kerneltest.Eventually(tb, 60*time.Second, "every service installed", func() error {
		if a.frontends == nil {
			m, err := ebpf.LoadPinnedMap(filepath.Join(dir, bpf.MapFrontends), nil)
			if err != nil {
				return err
			}
			a.frontends = m
		}
		for s := range mesh.services {
			if _, err := a.value(s); err != nil {
				return fmt.Errorf("service %d: %w", s, err)
			}
		}
		return nil
	})
	a.install = time.Since(start)
	tb.Cleanup(func() { a.frontends.Close() })
	return a
}

func (a *scaleAgent) value(s int) (bpf.Service, error) {
	var v bpf.Service
	fe := kernel.FrontendOf(mustAddrPort(scaleVIP(s)))
	err := a.frontends.Lookup(&fe, &v)
	return v, err
}

// change gives service s the endpoints of version v and returns the time
// from the file's rename to the new value in the kernel.
func (a *scaleAgent) change(tb testing.TB, s, v int) time.Duration {
	before, err := a.value(s)
	if err != nil {
		tb.Fatal(err)
	}
	a.mesh.services[s] = scaleServiceJSON(s, scaleEndpoints(s, v, a.mesh.perSvc))
	if a.mesh.dir {
		a.mesh.writeService(tb, s)
	} else {
		a.mesh.write(tb)
	}
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for {
		now, err := a.value(s)
		if err == nil && now.Generation != before.Generation {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("change %d of service %d not in the kernel after 20s", v, s)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// listenAll accepts on every address and answers with it, until the
// returned function or the test's end closes the listeners.
func listenAll(tb testing.TB, addrs []string) func() {
	var lns []net.Listener
	stop := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	tb.Cleanup(stop)
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			tb.Fatal(err)
		}
		lns = append(lns, ln)
		go serveAddr(ln, a)
	}
	return stop
}

func serveAddr(ln net.Listener, self string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(self))
		c.Close()
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestAgentScaleFile is the scale test through the agent's file source,
// with the topology in one file and in a directory of per-service files.
func TestAgentScaleFile(t *testing.T) {
	kerneltest.RequireRoot(t)
	for _, dir := range []bool{false, true} {
		t.Run(fmt.Sprintf("dir=%v", dir), func(t *testing.T) { scaleFile(t, dir) })
	}
}

func scaleFile(t *testing.T, dir bool) {
	services, changes := 1000, 200
	if dir { // the 200 changes run on the one file; the directory's are as cheap
		changes = 50
	}
	if raceEnabled {
		services, changes = 100, 20
	}
	mesh := newScaleMesh(t, services, 100, dir)
	a := startScaleAgent(t, mesh)
	t.Logf("%d services, %d endpoints: installed %v after start", services, services*100, a.install)
	rng := rand.New(rand.NewPCG(15, 15))
	var lat []time.Duration
	for v := 1; v <= changes; v++ {
		s := rng.IntN(services)
		addrs := scaleEndpoints(s, v, mesh.perSvc)
		stop := listenAll(t, addrs)
		lat = append(lat, a.change(t, s, v))
		for range 3 {
			got, err := kerneltest.Ask(scaleVIP(s))
			if err != nil || !slices.Contains(addrs, got) {
				t.Fatalf("change %d: a connect to service %d reached %q (%v), want one of its new endpoints", v, s, got, err)
			}
		}
		stop()
	}
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	t.Logf("file change → kernel over %d single-service changes: p50 %v, p99 %v, max %v", changes, p50, p99, percentile(lat, 1))
	if p50 > time.Second {
		t.Errorf("p50 %v: a one-service change must not cost a whole reload (budget 100 ms)", p50)
	}
}

// BenchmarkAgentUpdate: one 100-endpoint service changes in a topology of
// 1,000 such services (100,000 endpoints; one 8.7 MB JSON file, or a
// directory of one file per service); ns/op is the mean time from the
// file's rename to the new service value in the kernel, through the agent
// (its 10 ms watch interval included: 5 ms on average).
func BenchmarkAgentUpdate(b *testing.B) {
	kerneltest.RequireRoot(b)
	for _, dir := range []bool{false, true} {
		b.Run(fmt.Sprintf("dir=%v", dir), func(b *testing.B) {
			mesh := newScaleMesh(b, 1000, 100, dir)
			a := startScaleAgent(b, mesh)
			rng := rand.New(rand.NewPCG(15, 16))
			var lat []time.Duration
			v := 0
			for b.Loop() {
				v++
				lat = append(lat, a.change(b, rng.IntN(len(mesh.services)), v))
			}
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "ns/op")
			b.ReportMetric(float64(percentile(lat, 0.5).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(percentile(lat, 0.99).Nanoseconds()), "p99-ns")
		})
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
