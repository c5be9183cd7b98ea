package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// TestMeasureAgentMemoryAndCPU is a measurement, not a check: it runs only
// with LOCTREE_MEASURE=agent (as root), and prints what docs/PERFORMANCE.md
// "The agent on every node" reports:
//
//	LOCTREE_MEASURE=agent go test -run TestMeasureAgentMemoryAndCPU -v -timeout 60m ./cmd/loctree/
//
// It builds the loctree binary (the test binary's own size and code would
// distort the RSS; LOCTREE_MEASURE_BIN=PATH measures that binary instead),
// writes a mesh as a directory of one file per service (the layout a
// config-management tool writes), and runs `loctree agent` on it as a
// daemon:
//   - memory: 1,000 services × 100 endpoints, then LOCTREE_MEASURE_CHANGES
//     (default 10,000) single-service changes, each waited for (the
//     agent's loctree_generation moves) before the next: VmRSS and VmHWM
//     from /proc at the start, every 1,000 changes and at the end;
//   - CPU: 100 services × 1,000 endpoints, 200 single-service changes: the
//     daemon's user+sys time per change (from /proc/PID/stat), less what it
//     spends idle (polling the directory) over the same time;
//   - beside it, with nft installed, the `nft -f` of the same change as
//     kube-proxy's nftables mode writes it (k8s.io/kubernetes v1.37.2
//     pkg/proxy/nftables/proxier.go: a partial sync of one service without
//     session affinity is ensureChain's add+flush of the service's chain and
//     writeServiceToEndpointDNATs' one rule, `dnat ip addr . port to numgen
//     random mod N map { i : ip . port, … }`), into a table holding the
//     other services' chains: user+sys of the nft process.
func TestMeasureAgentMemoryAndCPU(t *testing.T) {
	if os.Getenv("LOCTREE_MEASURE") != "agent" {
		t.Skip("a measurement: set LOCTREE_MEASURE=agent to run it")
	}
	kerneltest.RequireRoot(t)
	bin := os.Getenv("LOCTREE_MEASURE_BIN") // another build, to compare
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "loctree")
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	changes := 10000
	if v := os.Getenv("LOCTREE_MEASURE_CHANGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		changes = n
	}
	t.Run("memory", func(t *testing.T) {
		m := startMeasuredAgent(t, bin, 1000, 100)
		m.report(t, "installed, 8 s after start")
		for i := 1; i <= changes; i++ {
			m.change(t)
			if i%1000 == 0 || i == changes {
				m.report(t, fmt.Sprintf("after %d single-service changes", i))
			}
		}
		time.Sleep(5 * time.Second)
		m.report(t, "5 s after the last change")
	})
	t.Run("cpu", func(t *testing.T) {
		m := startMeasuredAgent(t, bin, 100, 1000)
		// Idle: polling the directory, and answering /metrics as often as
		// change() asks it while it waits.
		idleCPU, idleStart := m.cpu(t), time.Now()
		for time.Since(idleStart) < 5*time.Second {
			m.generation()
			time.Sleep(pollEvery)
		}
		idleRate := (m.cpu(t) - idleCPU).Seconds() / time.Since(idleStart).Seconds()
		const n = 200
		start, began := m.cpu(t), time.Now()
		for range n {
			m.change(t)
		}
		wall := time.Since(began)
		busy := (m.cpu(t) - start).Seconds() - idleRate*wall.Seconds()
		t.Logf("agent: %d changes of a 1,000-endpoint service in %.1f s; user+sys %.2f ms per change (idle %.1f ms/s of polling the directory and answering /metrics subtracted)",
			n, wall.Seconds(), 1000*busy/n, 1000*idleRate)
		m.report(t, "after the CPU run")
		nftPerChange(t, 100, 1000, n)
	})
}

type measuredAgent struct {
	cmd    *exec.Cmd
	dir    string
	listen string
	rng    *rand.Rand
	ports  map[int]int // service → port of its first endpoint
	nsvc   int
	neps   int
	gen    int
}

// startMeasuredAgent writes the mesh and starts the daemon on it.
func startMeasuredAgent(t *testing.T, bin string, services, endpoints int) *measuredAgent {
	m := &measuredAgent{dir: t.TempDir(), listen: kerneltest.FreeAddr(t), rng: rand.New(rand.NewPCG(1, 2)),
		ports: map[int]int{}, nsvc: services, neps: endpoints}
	for s := range services {
		m.ports[s] = 9700
		m.write(t, s)
	}
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	m.cmd = exec.Command(bin, "agent", "-f", m.dir, "--watch-interval", "20ms",
		"--locality", "region=r0,zone=z0,subzone=s0", "--cgroup", cg, "--bpffs", fs, "--listen", m.listen)
	log, err := os.Create(filepath.Join(t.TempDir(), "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.cmd.Process.Kill()
		m.cmd.Wait()
		exec.Command(bin, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs).Run()
	})
	kerneltest.Eventually(t, 60*time.Second, "first tree installed", func() error {
		g, err := m.generation()
		if err == nil && g < 1 {
			err = fmt.Errorf("generation %d", g)
		}
		m.gen = g
		return err
	})
	time.Sleep(8 * time.Second) // the first install settles (grace periods, GC)
	return m
}

// write writes service s's file: endpoints spread over 3 regions, 9 zones,
// 27 subzones, the first endpoint on the service's current port.
func (m *measuredAgent) write(t *testing.T, s int) {
	type ep struct {
		Address  string            `json:"address"`
		Locality map[string]string `json:"locality"`
	}
	eps := make([]ep, m.neps)
	for i := range eps {
		k := s*m.neps + i
		port := 9700
		if i == 0 {
			port = m.ports[s]
		}
		eps[i] = ep{Address: fmt.Sprintf("127.%d.%d.%d:%d", 1+(k>>16), (k>>8)&255, k&255, port),
			Locality: map[string]string{"region": fmt.Sprintf("r%d", i%3), "zone": fmt.Sprintf("z%d", i%9), "subzone": fmt.Sprintf("s%d", i%27)}}
	}
	doc := map[string]any{"services": []any{map[string]any{
		"name": fmt.Sprintf("svc-%04d", s), "vip": fmt.Sprintf("127.77.%d.%d:80", s/250, s%250+1), "endpoints": eps}}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(m.dir, fmt.Sprintf(".svc-%04d.tmp", s))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, fmt.Sprintf("svc-%04d.json", s))); err != nil {
		t.Fatal(err)
	}
}

// change moves one service's first endpoint to the other port and waits
// until the agent has installed the next generation.
func (m *measuredAgent) change(t *testing.T) {
	s := m.rng.IntN(m.nsvc)
	m.ports[s] = 9700 + 9701 - m.ports[s]
	m.write(t, s)
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err := m.generation()
		if err == nil && g > m.gen {
			m.gen = g
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("change of svc-%04d not installed within 30 s (generation %d, %v)", s, g, err)
		}
		time.Sleep(pollEvery)
	}
}

// pollEvery is how often change() reads the agent's generation.
const pollEvery = 5 * time.Millisecond

func (m *measuredAgent) generation() (int, error) {
	code, _, body, err := httpGet("http://" + m.listen + "/metrics")
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("/metrics: %d", code)
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, "loctree_generation "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no loctree_generation in /metrics")
}

// report logs the daemon's VmRSS and VmHWM.
func (m *measuredAgent) report(t *testing.T, when string) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rss, hwm string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	t.Logf("agent, %d services × %d endpoints, %s: VmRSS %s, VmHWM %s", m.nsvc, m.neps, when, rss, hwm)
}

// cpu is the daemon's user+sys time so far.
func (m *measuredAgent) cpu(t *testing.T) time.Duration {
	return procCPU(t, m.cmd.Process.Pid)
}

func procCPU(t *testing.T, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 14th and 15th of the line, 12th and 13th after it.
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

// nftPerChange loads kube-proxy-shaped chains for services × endpoints into
// a table and times `nft -f` of n single-service changes.
func nftPerChange(t *testing.T, services, endpoints, n int) {
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Logf("nft: not installed, no kube-proxy comparison (%v)", err)
		return
	}
	dir := t.TempDir()
	chain := func(s int) string {
		return fmt.Sprintf("service-%08X-ns/svc-%04d/tcp/http", s*2654435761&0xffffffff, s)
	}
	rule := func(s, port0 int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "add rule ip kube-proxy %s meta l4proto tcp dnat ip addr . port to numgen random mod %d map { ", chain(s), endpoints)
		for i := range endpoints {
			k := s*endpoints + i
			port := 9700
			if i == 0 {
				port = port0
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d : 127.%d.%d.%d . %d", i, 1+(k>>16), (k>>8)&255, k&255, port)
		}
		b.WriteString(" }\n")
		return b.String()
	}
	var base strings.Builder
	base.WriteString("add table ip kube-proxy\n")
	for s := range services {
		fmt.Fprintf(&base, "add chain ip kube-proxy %s\n", chain(s))
		base.WriteString(rule(s, 9700))
	}
	run := func(file string) time.Duration {
		cmd := exec.Command(nft, "-f", file)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft -f %s: %v\n%s", file, err, out)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exec.Command(nft, "delete", "table", "ip", "kube-proxy").Run()
	defer exec.Command(nft, "delete", "table", "ip", "kube-proxy").Run()
	run(write("base.nft", base.String()))
	rng := rand.New(rand.NewPCG(1, 2))
	ports := map[int]int{}
	var total time.Duration
	for i := range n {
		s := rng.IntN(services)
		if ports[s] == 0 {
			ports[s] = 9700
		}
		ports[s] = 9700 + 9701 - ports[s]
		c := chain(s)
		total += run(write(fmt.Sprintf("change-%d.nft", i),
			fmt.Sprintf("add chain ip kube-proxy %s\nflush chain ip kube-proxy %s\n", c, c)+rule(s, ports[s])))
	}
	t.Logf("nft -f, kube-proxy's partial sync of one service (%d endpoints) into a table of %d services: user+sys %.2f ms per change (%d changes)",
		endpoints, services, 1000*total.Seconds()/float64(n), n)
}
