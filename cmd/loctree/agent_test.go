package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// agentTopology has one VIP whose local (zone z1) endpoint is addr.
func agentTopology(addr string) string {
	return fmt.Sprintf(`services:
- name: echo
  vip: 127.77.1.1:80
  scopes: [region, zone]
  endpoints:
  - address: %s
    locality: {region: r1, zone: z1}
  - address: 127.0.7.9:9100
    locality: {region: r1, zone: z2}
`, addr)
}

type agentProc struct {
	cmd *exec.Cmd
	log *bytes.Buffer
}

func startLoctree(t *testing.T, args ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "LOCTREE_TEST_MAIN=1")
	p := &agentProc{cmd: cmd, log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

func runLoctree(t *testing.T, args ...string) string {
	t.Helper()
	p := startLoctree(t, args...)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("loctree %s: %v\n%s", strings.Join(args, " "), err, p.log)
	}
	return p.log.String()
}

func landsOn(want string) func() error {
	return func() error {
		got, err := kerneltest.Ask("127.77.1.1:80")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("VIP reached %s, want %s", got, want)
		}
		return nil
	}
}

func httpGet(url string, header ...string) (int, http.Header, string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), nil
}

// TestAgentLifecycle runs the real agent: install, file watch reload, a bad
// file kept out, /v1/tree with ETag, /metrics, kill -9 with the kernel path
// still working, restart re-adopting the pinned maps, uninstall twice.
func TestAgentLifecycle(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	kerneltest.Backends(t, []string{"127.0.7.1:9100", "127.0.7.2:9100", "127.0.7.3:9100", "127.0.7.9:9100"})
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	write := func(s string) {
		if err := os.WriteFile(topo+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Rename(topo+".tmp", topo)
	}
	write(agentTopology("127.0.7.1:9100"))
	listen := kerneltest.FreeAddr(t)
	args := []string{"agent", "-f", topo, "--locality", "region=r1,zone=z1", "--cgroup", cg, "--bpffs", fs,
		"--listen", listen, "--watch-interval", "50ms"}
	agent := startLoctree(t, args...)
	base := "http://" + listen
	kerneltest.Eventually(t, 10*time.Second, "healthz", func() error {
		code, _, _, err := httpGet(base + "/healthz")
		if err == nil && code != 200 {
			err = fmt.Errorf("healthz %d", code)
		}
		return err
	})
	kerneltest.Eventually(t, 10*time.Second, "first install", landsOn("127.0.7.1:9100"))

	code, h, body, err := httpGet(base + "/v1/tree")
	if err != nil || code != 200 || h.Get("ETag") == "" || !strings.HasPrefix(body, "LTRE") {
		t.Fatalf("/v1/tree: %d %v etag %q", code, err, h.Get("ETag"))
	}
	if code, _, _, _ := httpGet(base+"/v1/tree", "If-None-Match", h.Get("ETag")); code != http.StatusNotModified {
		t.Fatalf("/v1/tree with If-None-Match: %d, want 304", code)
	}

	write(agentTopology("127.0.7.2:9100"))
	kerneltest.Eventually(t, 10*time.Second, "reload after file change", landsOn("127.0.7.2:9100"))

	write("services: [{name: broken, endpoints: [{address: nope}]}]\n")
	kerneltest.Eventually(t, 10*time.Second, "bad topology counted", func() error { return metricAtLeast(base, "loctree_install_errors_total", 1) })
	if err := landsOn("127.0.7.2:9100")(); err != nil {
		t.Fatalf("after a bad topology: %v", err)
	}
	if err := metricAtLeast(base, "loctree_kernel_redirects_total", 2); err != nil {
		t.Fatal(err)
	}

	agent.cmd.Process.Signal(syscall.SIGKILL)
	agent.cmd.Wait()
	for range 20 {
		if err := landsOn("127.0.7.2:9100")(); err != nil {
			t.Fatalf("agent killed: kernel path stopped working: %v", err)
		}
	}

	write(agentTopology("127.0.7.3:9100"))
	again := startLoctree(t, args...)
	kerneltest.Eventually(t, 10*time.Second, "restarted agent applies the next change", landsOn("127.0.7.3:9100"))
	if !strings.Contains(again.log.String(), "re-adopted pinned services") {
		t.Fatalf("restarted agent did not re-adopt:\n%s", again.log)
	}
	again.cmd.Process.Signal(syscall.SIGTERM)
	if err := again.cmd.Wait(); err != nil {
		t.Fatalf("agent after SIGTERM: %v\n%s", err, again.log)
	}
	if err := landsOn("127.0.7.3:9100")(); err != nil {
		t.Fatalf("after a clean stop the programs stay: %v", err)
	}
	// Issue 20, section 2: the agent says what it leaves in place.
	if want := "loctree agent uninstall --cgroup " + cg + " --bpffs " + fs; !strings.Contains(again.log.String(), want) {
		t.Fatalf("agent after SIGTERM does not say what it leaves and how to remove it (%q):\n%s", want, again.log)
	}

	for range 2 {
		runLoctree(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
	}
	if _, err := kerneltest.Ask("127.77.1.1:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("after uninstall the VIP must not be redirected: %v", err)
	}
	if _, err := os.Stat(fs); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bpffs dir left behind: %v", err)
	}
}

// TestAgentOnce: --once installs, leaves the programs attached and exits
// 0; a cgroup given its own locality is balanced for it.
func TestAgentOnce(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	kerneltest.Backends(t, []string{"127.0.7.1:9100", "127.0.7.9:9100"})
	gw := filepath.Join(cg, "gateway")
	if err := os.Mkdir(gw, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kerneltest.MoveTo(t, cg); os.Remove(gw) })
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(agentTopology("127.0.7.1:9100")), 0o644)
	runLoctree(t, "agent", "--once", "-f", topo, "--locality", "region=r1,zone=z2", "--cgroup", cg, "--bpffs", fs,
		"--cgroup-locality", gw+":region=r1,zone=z1")
	if err := landsOn("127.0.7.9:9100")(); err != nil {
		t.Fatal(err)
	}
	kerneltest.MoveTo(t, gw)
	if err := landsOn("127.0.7.1:9100")(); err != nil {
		t.Fatalf("from the gateway cgroup: %v", err)
	}
	kerneltest.MoveTo(t, cg)
	runLoctree(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
}

// TestAgentCapacity: a topology that does not fit is refused before any
// change, with an error naming the flag.
func TestAgentCapacity(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(agentTopology("127.0.7.1:9100")), 0o644)
	p := startLoctree(t, "agent", "--once", "-f", topo, "--cgroup", cg, "--bpffs", fs, "--max-endpoints", "1")
	if err := p.cmd.Wait(); err == nil || !strings.Contains(p.log.String(), "--max-endpoints") {
		t.Fatalf("want a capacity error naming --max-endpoints, got %v:\n%s", err, p.log)
	}
	if _, err := kerneltest.Ask("127.77.1.1:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("nothing may be attached after a refused install: %v", err)
	}
	if _, err := os.Stat(fs); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused first install left pins behind: %v", err)
	}
	t.Logf("refused as expected:\n%s", p.log)
}

func metricAtLeast(base, name string, min float64) error {
	_, _, body, err := httpGet(base + "/metrics")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var v float64
		if n, _ := fmt.Sscanf(sc.Text(), name+" %g", &v); n == 1 {
			if v >= min {
				return nil
			}
			return fmt.Errorf("%s = %g, want ≥ %g", name, v, min)
		}
	}
	return fmt.Errorf("%s missing from /metrics", name)
}

// TestAgentTrafficFlags: an empty --traffic-scope and a --max-traffic of 0
// or past 2^24 are refused before anything runs, naming the flag.
func TestAgentTrafficFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--traffic-scope", ""}, `--traffic-scope "": must name a scope key`},
		{[]string{"--traffic-scope", " "}, `--traffic-scope " ": must name a scope key`},
		{[]string{"--max-traffic", "0"}, "--max-traffic 0: must be 1..16777216"},
		{[]string{"--max-traffic", "16777217"}, "--max-traffic 16777217: must be 1..16777216"},
	} {
		args := append([]string{"agent", "--cgroup", t.TempDir(), "--bpffs", t.TempDir()}, tt.args...)
		code, _, errs := runCLI(t, args...)
		if code == 0 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tt.args, code, errs, tt.want)
		}
	}
}
