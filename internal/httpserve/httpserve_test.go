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
