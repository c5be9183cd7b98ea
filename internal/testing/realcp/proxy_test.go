package realcp

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestProxyBlackhole: a connection through the proxy echoes until the
// blackhole, then reads nothing and is not closed; a new connection
// during the blackhole is closed at once; after Heal a new one echoes
// again while the silenced one stays silent.
func TestProxyBlackhole(t *testing.T) {
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old := dialProxy(t, p)
	if got := roundTrip(old, "a"); got != "a" {
		t.Fatalf("before the blackhole: echoed %q, want a", got)
	}
	p.Blackhole()
	if got := roundTrip(old, "b"); got != "timeout" {
		t.Errorf("an established connection in the blackhole: %q, want a timeout (silent, not closed)", got)
	}
	if got := roundTrip(dialProxy(t, p), "c"); got != "closed" {
		t.Errorf("a new connection in the blackhole: %q, want closed", got)
	}
	p.Heal()
	if got := roundTrip(dialProxy(t, p), "d"); got != "d" {
		t.Errorf("a new connection after Heal: echoed %q, want d", got)
	}
	if got := roundTrip(old, "e"); got != "timeout" {
		t.Errorf("the silenced connection after Heal: %q, want a timeout", got)
	}
}

func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dialProxy(t *testing.T, p *Proxy) net.Conn {
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes s and line end and reads a line back within 300 ms:
// the line, "timeout" or "closed".
func roundTrip(c net.Conn, s string) string {
	if _, err := c.Write([]byte(s + "\n")); err != nil {
		return "closed"
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	line, err := bufio.NewReader(c).ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return "timeout"
	}
	if err != nil {
		return "closed"
	}
	return line[:len(line)-1]
}
