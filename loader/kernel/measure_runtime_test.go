package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestMeasureConnectRuntime reports the kernel's own run time of
// lt_connect4 per connect (bpf_stats: run_time_ns / run_cnt) for the plain
// service and each spillover service of BenchmarkConnect, so the extra
// cost of a spillover connect is seen without the connect around it. A
// measurement: LOCTREE_MEASURE=connect (as root) runs it,
//
//	LOCTREE_MEASURE=connect go test -run TestMeasureConnectRuntime -v ./loader/kernel/
func TestMeasureConnectRuntime(t *testing.T) {
	if os.Getenv("LOCTREE_MEASURE") != "connect" {
		t.Skip("a measurement: set LOCTREE_MEASURE=connect to run it")
	}
	kerneltest.RequireRoot(t)
	const port, connects = 9300, 4000
	acceptors(t, port)
	cg := kerneltest.Cgroup(t)
	in, err := Open(Config{Locality: benchLocality})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := in.Attach(cg); err != nil {
		t.Fatal(err)
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("bpf_stats: %v", err)
	}
	defer stats.Close()
	vips := []struct {
		name string
		vip  [4]byte
	}{{"plain", [4]byte{127, 77, 3, 1}}, {"spillover", [4]byte{127, 77, 3, 2}},
		{"spillover-locality", [4]byte{127, 77, 3, 5}}, {"spillover-network", [4]byte{127, 77, 3, 6}},
		{"spillover-cluster", [4]byte{127, 77, 3, 8}}, {"spillover-classes", [4]byte{127, 77, 3, 9}}}
	for i, n := range []int{10, 1000} {
		top := &shared.Topology{Services: []shared.ServiceSpec{bigService("big", "127.77.3.1:80", n, port),
			spilloverService("spill", "127.77.3.2:80", n, port), localityService("loc", "127.77.3.5:80", n, port),
			networkSpillService("netspill", "127.77.3.6:80", n, port), clusterSpillService("cluspill", "127.77.3.8:80", n, port),
			classSpillService("clsspill", "127.77.3.9:80", n, port)}}
		if _, err := in.Apply(mustBuild(t, top, uint64(i+1))); err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 3; round++ {
			for _, v := range vips {
				ns := runtimePerConnect(t, in, cg, &unix.SockaddrInet4{Addr: v.vip, Port: 80}, connects)
				t.Logf("endpoints=%d round=%d %-20s %6.0f ns/run", n, round, v.name, ns)
			}
		}
	}
}

// runtimePerConnect connects count sockets in cg to vip and returns the
// growth of lt_connect4's run_time_ns over that of its run_cnt.
func runtimePerConnect(t *testing.T, in *Installer, cg string, vip unix.Sockaddr, count int) float64 {
	home := filepath.Dir(cg)
	kerneltest.MoveTo(t, cg)
	defer kerneltest.MoveTo(t, home)
	before, err := in.k.objs.LtConnect4.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for range count {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := connectRetry(fd, vip); err != nil {
			t.Fatal(fmt.Errorf("connect: %w", err))
		}
		unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		unix.Close(fd)
	}
	after, err := in.k.objs.LtConnect4.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return float64(after.Runtime-before.Runtime) / float64(after.RunCount-before.RunCount)
}
