package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/internal/testing/wasmtest"
)

// build compiles the loctree CLI and the filter's .wasm (standard Go
// compiler, wasip1 reactor, as `make wasm` does) into a temporary directory.
func build(t *testing.T) (cli, wasm string) {
	t.Helper()
	cli = filepath.Join(t.TempDir(), "loctree")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", cli, "github.com/loctree/loctree/cmd/loctree")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build loctree: %v\n%s", err, out)
	}
	return cli, wasmtest.Build(t, "../filter")
}

// process is a running child process whose output is kept for failures.
type process struct {
	name string
	cmd  *exec.Cmd
	out  syncbuf.Buffer
	done chan error
}

// start runs the CLI with args; the test's cleanup stops it (SIGTERM, then
// SIGKILL) and prints its output if the test failed.
func start(t *testing.T, cli, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(cli, args...), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.out.String())
		}
	})
	return p
}

// stop sends SIGTERM and waits (SIGKILL after 5 s); it returns the exit error.
func (p *process) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		return fmt.Errorf("%s ignored SIGTERM", p.name)
	}
}

// kill kills the process with SIGKILL and waits for it.
func (p *process) kill() {
	p.cmd.Process.Kill()
	err := <-p.done
	p.done <- err
}

// endpointHeader is the header the filter writes (Envoy's OverrideHost).
const endpointHeader = "X-Gateway-Destination-Endpoint"

// sawHeader carries back the endpoint header a backend received.
const sawHeader = "X-Saw-Endpoint-Header"

// backends serve HTTP on each address (127.0.0.0/8 only), answering with
// their own address and echoing the endpoint header they received.
func backends(t *testing.T, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		if ip := net.ParseIP(strings.Split(a, ":")[0]); ip == nil || !ip.IsLoopback() {
			t.Fatalf("backend %q is not on 127.0.0.0/8", a)
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("backend %s: %v", a, err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(sawHeader, r.Header.Get(endpointHeader))
			io.WriteString(w, a)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
}

var client = &http.Client{Timeout: 5 * time.Second}

// get sends GET url with the Host header host ("" keeps the URL's).
func get(url, host string, header ...string) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// dialVIP connects to a service VIP (the kernel rewrites the connect),
// checks that getpeername still shows the VIP, and returns the address of
// the backend that answered. A refused connect returns errRefused.
func dialVIP(vip string) (string, error) {
	c, err := net.DialTimeout("tcp", vip, 2*time.Second)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "", errRefused
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	if peer := c.RemoteAddr().String(); peer != vip {
		return "", fmt.Errorf("getpeername shows %s, want the VIP %s", peer, vip)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", vip)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", fmt.Errorf("read response through %s: %w", vip, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// errRefused stands for "no endpoint chosen": a refused connect (kernel)
// or the filter's strict-mode 503.
var errRefused = errors.New("refused: no candidate")
