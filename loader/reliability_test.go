package loader

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// freeAddr returns a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Item 10 of issue 9: the agent closes an idle keep-alive connection
// (300 idle clients used to hold 338 fds forever). No kernel needed: only
// the HTTP server runs.
func TestReliabilityAgentClosesIdleConnections(t *testing.T) {
	addr := freeAddr(t)
	a := &agent{cfg: AgentConfig{Listen: addr}, log: slog.New(slog.DiscardHandler), metrics: newMetrics("")}
	stop, err := a.serve()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	const wait = 20 * time.Second
	c.SetReadDeadline(time.Now().Add(wait))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection: %v after up to %s, want closed by the agent", err, wait)
	}
}

// Item 17: --once serves nothing, so its log names no listen address.
func TestReliabilityOnceLogsNoListen(t *testing.T) {
	a := &agent{cfg: AgentConfig{Listen: "127.0.0.1:15099", Once: true}}
	if got := a.listenLog(); got != "none" {
		t.Fatalf("--once logs listen=%s", got)
	}
}
