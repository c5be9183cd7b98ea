package httpserve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func start(t *testing.T, l Limits) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", l.MaxConns)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), l)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func get(t *testing.T, c net.Conn) {
	t.Helper()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

// Item 10 of issue 9: an idle keep-alive connection is closed.
func TestReliabilityIdleConnectionClosed(t *testing.T) {
	addr := start(t, Limits{ReadHeader: time.Second, Read: time.Second, Write: time.Second, Idle: 200 * time.Millisecond, MaxConns: 8})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get(t, c)
	if !closedWithin(c, 2*time.Second) {
		t.Fatal("idle keep-alive connection still open after 2s (idle timeout 200ms)")
	}
}

// Item 10: past MaxConns, connections wait for a slot; a client that sends
// nothing loses its slot after the read-header timeout.
func TestReliabilityConnectionCap(t *testing.T) {
	addr := start(t, Limits{ReadHeader: 300 * time.Millisecond, Read: time.Second, Write: time.Second, Idle: time.Second, MaxConns: 1})
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(50 * time.Millisecond) // the idle client holds the one slot
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	get(t, c)
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("second connection served after %s, before the first lost its slot", waited)
	}
	if !closedWithin(idle, time.Second) {
		t.Fatal("the silent client was not closed")
	}
}

func TestMaxConnsFollowsFileLimit(t *testing.T) {
	if n := capToFiles(1 << 30); n < 1 || n >= 1<<30 {
		t.Fatalf("capToFiles(1<<30) = %d, want a cap below the fd limit", n)
	}
	if !strings.Contains(Describe(Limits{MaxConns: 3}), "3") {
		t.Fatal("Describe omits the cap")
	}
}

// dialFrom connects to addr from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A client holding every slot loses its oldest connection to a client that
// holds none, which is served at once; the flooding client's next
// connection waits.
func TestFairShareBetweenClients(t *testing.T) {
	addr := start(t, Limits{ReadHeader: 10 * time.Second, Read: 10 * time.Second, Write: 10 * time.Second, Idle: 10 * time.Second, MaxConns: 4})
	var flood []net.Conn
	for range 4 {
		flood = append(flood, dialFrom(t, "127.0.0.1", addr))
	}
	time.Sleep(50 * time.Millisecond) // all four served
	other := dialFrom(t, "127.0.0.2", addr)
	other.SetDeadline(time.Now().Add(2 * time.Second))
	get(t, other)
	if !closedWithin(flood[0], time.Second) {
		t.Fatal("the flooding client's oldest connection kept its slot")
	}
	for _, c := range flood[1:] {
		if closedWithin(c, 50*time.Millisecond) {
			t.Fatal("a connection other than the flooding client's oldest was closed")
		}
	}
	// 3 + 1 slots taken, 3 vs 1: the flooding client's next one waits.
	next := dialFrom(t, "127.0.0.1", addr)
	next.SetDeadline(time.Now().Add(300 * time.Millisecond))
	io.WriteString(next, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := next.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection over the flooding client's share was served")
	}
}

// Past max/4 waiting connections, more are closed at once.
func TestFairWaitingBounded(t *testing.T) {
	addr := start(t, Limits{ReadHeader: 10 * time.Second, Read: 10 * time.Second, Write: 10 * time.Second, Idle: 10 * time.Second, MaxConns: 4})
	for range 4 + 1 { // every slot, and the one waiting place (4/4)
		dialFrom(t, "127.0.0.1", addr)
	}
	time.Sleep(50 * time.Millisecond)
	extra := dialFrom(t, "127.0.0.1", addr)
	if !closedWithin(extra, time.Second) {
		t.Fatal("a sixth connection with 4 slots and 1 waiting place was kept open")
	}
}

// Closing the listener closes the connections still waiting for a slot.
func TestFairCloseClosesWaiting(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	served := dialFrom(t, "127.0.0.1", ln.Addr().String())
	if _, err := ln.Accept(); err != nil {
		t.Fatal(err)
	}
	waiting := dialFrom(t, "127.0.0.1", ln.Addr().String())
	time.Sleep(50 * time.Millisecond) // accepted by the loop, waiting for the one slot
	ln.Close()
	if !closedWithin(waiting, time.Second) {
		t.Fatal("a waiting connection stayed open after the listener closed")
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("Accept after Close returned a connection")
	}
	_ = served
}
