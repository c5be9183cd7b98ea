package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

// Reliability: hostile input to the command line from issue 9, one case
// per item. None of these runs the agent.

// fifoWriter makes a FIFO, writes data into it and holds it open for hold,
// as a stream that never ends would.
func fifoWriter(t *testing.T, data []byte, hold time.Duration) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		f.Write(data)
		time.Sleep(hold)
	}()
	return path
}

func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %s", d)
	}
}

// Item 9: a tree is read header first; a wrong header ends the read before
// the rest of the input (an endless stream, /dev/zero) is read.
func TestReliabilityInspectReadsHeaderFirst(t *testing.T) {
	path := fifoWriter(t, make([]byte, 4096), 5*time.Second)
	within(t, 2*time.Second, func() {
		code, _, errs := runCLI(t, "tree", "inspect", path)
		if code == 0 || !strings.Contains(errs, "magic") {
			t.Errorf("exit %d, stderr %q; want a bad-magic error", code, errs)
		}
	})
	blob := buildBlob(t, "a")
	short := filepath.Join(t.TempDir(), "short.bin")
	os.WriteFile(short, blob[:len(blob)-1], 0o600)
	if code, _, errs := runCLI(t, "tree", "inspect", short); code == 0 || !strings.Contains(errs, "bytes") {
		t.Errorf("truncated blob: exit %d, stderr %q", code, errs)
	}
}

func buildBlob(t *testing.T, name string) []byte {
	t.Helper()
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: name, Hosts: []string{name + ".h"},
		Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:80", Locality: shared.Locality{"region": "r"}}}}}}, shared.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tree.Bytes()
}

// Item 13: names with control characters cannot be built any more, but a
// blob made elsewhere may hold them; inspect prints them escaped.
func TestReliabilityInspectEscapes(t *testing.T) {
	blob := buildBlob(t, "evilX")
	blob = []byte(strings.ReplaceAll(string(blob), "evilX", "evil\x1b"))
	binary.LittleEndian.PutUint32(blob[8:], crc32.Checksum(blob[12:], crc32.MakeTable(crc32.Castagnoli)))
	path := filepath.Join(t.TempDir(), "evil.bin")
	if err := os.WriteFile(path, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "inspect", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `evil\x1b`) {
		t.Fatalf("output holds a raw escape or lacks the escaped name:\n%q", out)
	}
}

// Item 12: flags out of range are errors that give the range, checked
// before any work (the module is not even read).
func TestReliabilityServeWorkersRange(t *testing.T) {
	for _, w := range []string{"-1", "0", "100000"} {
		code, _, errs := runCLI(t, "wasm", "serve", "--module", "/nonexistent.wasm", "--listen", "127.0.0.1:0", "--workers", w)
		if code == 0 || !strings.Contains(errs, "--workers "+w) || !strings.Contains(errs, "1..") {
			t.Errorf("--workers %s: exit %d, stderr %q; want the allowed range", w, code, errs)
		}
	}
}

// Item 12: capacity flags of 0 (which meant the default silently) and
// over what the format holds are refused; checked without running the
// agent.
func TestReliabilityAgentCapacityRange(t *testing.T) {
	for _, c := range []kernel.Capacity{
		{Services: 0, Nodes: 1, Endpoints: 1, Sockets: 1},
		{Services: 1, Nodes: 0, Endpoints: 1, Sockets: 1},
		{Services: 1 << 20, Nodes: 1, Endpoints: 1, Sockets: 1},
	} {
		if err := checkCapacity(c); err == nil || !strings.Contains(err.Error(), "1..") {
			t.Errorf("%+v: error %v, want the allowed range", c, err)
		}
	}
	if err := checkCapacity(kernel.DefaultCapacity()); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// Item 15: --plugin-config @FILE is bounded and reads only regular files.
func TestReliabilityPluginConfigFile(t *testing.T) {
	mod := filepath.Join(t.TempDir(), "m.wasm")
	os.WriteFile(mod, []byte("\x00asm"), 0o600)
	path := fifoWriter(t, []byte("{}"), 5*time.Second)
	within(t, 2*time.Second, func() {
		code, _, errs := runCLI(t, "wasm", "run", "--module", mod, "--plugin-config", "@"+path)
		if code == 0 || !strings.Contains(errs, "not a regular file") {
			t.Errorf("exit %d, stderr %q; want not a regular file", code, errs)
		}
	})
}

// Item 10: `wasm serve` closes idle keep-alive connections.
func TestReliabilityServeClosesIdleConnections(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	url := startServe(t, "--module", mod, "--idle-timeout", "300ms", "--max-connections", "16",
		"--plugin-config", `{"topology":{"services":[{"name":"a","endpoints":[{"address":"127.0.0.1:9"}]}]}}`)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: unknown\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection: %v, want closed after the 300ms idle timeout", err)
	}
}

// Item 17: a failing tree fetch is logged once per failure streak (by the
// filter), not once per attempt by the host as well.
func TestReliabilityServeLogsFetchFailuresOnce(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	var stderr syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newRootCmd()
	cmd.SetArgs([]string{"wasm", "serve", "--listen", "127.0.0.1:0", "--module", mod, "--workers", "1", "--upstream", "agent=" + closedAddr(t),
		"--plugin-config", `{"tree":{"cluster":"agent","refresh_ms":100}}`})
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	time.Sleep(1500 * time.Millisecond) // several failed fetches
	cancel()
	<-done
	if n := strings.Count(stderr.String(), "level=WARN"); n > 1 {
		t.Fatalf("%d warnings for one failure streak, want at most 1:\n%s", n, stderr.String())
	}
}

// closedAddr is a 127.0.0.1 address that refuses connections.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
