package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// kernelPlane is the L4 plane under load: the real agent (`loctree agent`,
// its programs attached to the test's cgroup) on the topology, and per
// client zone a relay process in a cgroup of the zone's locality
// (--cgroup-locality) that opens one connection to the service's VIP per
// request, so the connect program picks for every request. A socket takes
// the cgroup of the process that creates it, and the test process cannot
// be in three at once: hence a process per zone.
type kernelPlane struct {
	t      *testing.T
	cli    string
	cg, fs string // the attach cgroup and the bpffs directory
	vip    string
}

func newKernelPlane(t *testing.T, vip string) *kernelPlane {
	t.Helper()
	kerneltest.RequireRoot(t)
	cli, _ := build(t)
	return &kernelPlane{t: t, cli: cli, cg: kerneltest.Cgroup(t), fs: filepath.Join(kerneltest.BPFFS(t), "loctree"), vip: vip}
}

func (p *kernelPlane) name() string { return "kernel" }

func (p *kernelPlane) start(ctx context.Context, topology []byte, clients []shared.Locality) ([]sendFunc, func(), error) {
	var stops []func()
	var once sync.Once
	stop := func() { // in reverse: relays, agent, uninstall, cgroups
		once.Do(func() {
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
		})
	}
	send, err := p.startAll(topology, clients, &stops)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return send, stop, nil
}

// startAll starts the agent and the relays, adding how to stop each to
// stops, and waits until every zone's connects reach a backend.
func (p *kernelPlane) startAll(topology []byte, clients []shared.Locality, stops *[]func()) ([]sendFunc, error) {
	topo := filepath.Join(p.t.TempDir(), "topology.yaml")
	if err := os.WriteFile(topo, topology, 0o644); err != nil {
		return nil, err
	}
	listen := kerneltest.FreeAddr(p.t)
	args := []string{"agent", "-f", topo, "--cgroup", p.cg, "--bpffs", p.fs, "--listen", listen}
	var dirs []string
	for i, loc := range clients {
		dir := filepath.Join(p.cg, fmt.Sprintf("load-zone-%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		*stops = append(*stops, func() { os.Remove(dir) })
		dirs = append(dirs, dir)
		args = append(args, "--cgroup-locality", dir+":"+flagLocality(loc))
	}
	*stops = append(*stops, func() { run(p.t, p.cli, "agent", "uninstall", "--cgroup", p.cg, "--bpffs", p.fs) })
	agent := start(p.t, p.cli, "agent", args...)
	*stops = append(*stops, func() { agent.stop() })
	kerneltest.Eventually(p.t, 15*time.Second, "agent healthz", func() error { return httpOK("http://"+listen+"/healthz", "") })
	var send []sendFunc
	for _, dir := range dirs {
		addr, kill, err := startRelay(dir, p.vip)
		if err != nil {
			return nil, err
		}
		*stops = append(*stops, kill)
		send = append(send, httpSender(addr))
	}
	return send, reachable(send)
}

// reachable checks that a request of each sender reaches a backend within
// 5 s: the agent installs the service in the kernel, or refuses it (then
// every connect to the VIP is refused).
func reachable(send []sendFunc) error {
	for z, s := range send {
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			status, backend, serr := s(context.Background())
			switch {
			case serr != nil:
				err = serr
			case backend == "":
				err = fmt.Errorf("the relay answered %d, no backend did", status)
			default:
				err = nil
			}
			if err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("zone %d's connects to the VIP reach no backend (is the service installed in the kernel?): %w", z, err)
		}
	}
	return nil
}

// relayEnv, set to a VIP, makes the test binary a relay (TestMain).
const relayEnv = "LOCTREE_E2E_VIP_RELAY"

// startRelay starts the test binary as a relay to vip in the cgroup dir
// (clone3 CLONE_INTO_CGROUP) and returns its HTTP address.
func startRelay(dir, vip string) (string, func(), error) {
	cgfd, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	defer cgfd.Close()
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), relayEnv+"="+vip)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cgfd.Fd()), Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start a relay in %s: %w", dir, err)
	}
	kill := func() { cmd.Process.Kill(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		kill()
		return "", nil, fmt.Errorf("relay in %s: %w", dir, err)
	}
	return strings.TrimSpace(line), kill, nil
}

// relay serves HTTP on a free port of 127.0.0.1 (printed on stdout): each
// request becomes one new connection to vip, through the kernel's connect
// program, whose answer's status and backend header it passes back.
func relay(vip string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	fmt.Println(ln.Addr())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, backend, err := viaVIP(vip)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set(backendHeader, backend)
		w.WriteHeader(status)
	}))
	fmt.Fprintln(os.Stderr, "relay:", err)
	return 1
}

// viaVIP sends GET / for the service on a new connection to vip.
func viaVIP(vip string) (int, string, error) {
	c, err := net.DialTimeout("tcp", vip, 2*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(requestTimeout))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", loadService)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(backendHeader), nil
}
