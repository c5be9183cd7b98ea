package httpserve

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// fairListener serves at most max connections at once and shares them
// between clients by source address, as Envoy's overload manager sheds a
// listener's load and net/http leaves to the caller: a connection that
// arrives when every slot is taken
//
//   - takes the oldest slot of the client that holds the most, if that
//     client holds at least two more than the newcomer's client (a client
//     holding few connections always gets in);
//   - else waits, up to max/4 of them, first come first served, for a slot
//     to be given back;
//   - else is closed at once.
//
// So a client flooding the server with connections that never finish (a
// slowloris, or requests whose answers it does not read) loses its own
// oldest ones to every other client, and holds at most max + max/4 file
// descriptors. Clients that share an address (behind one NAT, or on the
// node's loopback) share its share.
type fairListener struct {
	inner      net.Listener
	max        int
	maxWaiting int
	ready      chan net.Conn // admitted, for Accept (room for every slot)
	done       chan struct{} // closed when inner fails for good
	err        error         // why, set before done is closed

	mu      sync.Mutex
	closed  bool
	open    int
	clients map[netip.Addr][]*slotConn // open connections per client, oldest first
	waiting []net.Conn
}

func newFairListener(inner net.Listener, slots int) *fairListener {
	l := &fairListener{inner: inner, max: slots, maxWaiting: max(1, slots/4), ready: make(chan net.Conn, slots),
		done: make(chan struct{}), clients: map[netip.Addr][]*slotConn{}}
	go l.acceptLoop()
	return l
}

// Accept returns the next admitted connection.
func (l *fairListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *fairListener) Addr() net.Addr { return l.inner.Addr() }

// Close stops accepting and closes the connections not yet served.
func (l *fairListener) Close() error {
	err := l.inner.Close()
	l.mu.Lock()
	l.closed = true
	waiting := l.waiting
	l.waiting = nil
	l.mu.Unlock()
	for _, c := range waiting {
		c.Close()
	}
	l.drainReady()
	return err
}

// acceptLoop admits every connection inner accepts, backing off on
// temporary errors (out of file descriptors) as http.Server.Serve does.
func (l *fairListener) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := l.inner.Accept()
		if err != nil {
			var ne interface{ Temporary() bool }
			if errors.As(err, &ne) && ne.Temporary() {
				time.Sleep(backoff)
				backoff = min(2*backoff, time.Second)
				continue
			}
			l.err = err
			close(l.done)
			l.drainReady()
			return
		}
		backoff = 5 * time.Millisecond
		if evicted := l.admit(c); evicted != nil {
			evicted.Close()
		}
	}
}

// drainReady closes admitted connections nobody will accept.
func (l *fairListener) drainReady() {
	for {
		select {
		case c := <-l.ready:
			c.Close()
		default:
			return
		}
	}
}

// admit serves c, or keeps it waiting, or closes it (see fairListener). It
// returns the connection c took the slot of, for the caller to close.
func (l *fairListener) admit(c net.Conn) (evicted net.Conn) {
	client := clientOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		c.Close()
		return nil
	case l.open < l.max:
	case l.fairer(client):
		top, _ := l.heaviest()
		sc := l.clients[top][0]
		l.remove(sc)
		evicted = sc
	case len(l.waiting) < l.maxWaiting:
		l.waiting = append(l.waiting, c)
		return nil
	default:
		c.Close()
		return nil
	}
	l.serve(c, client)
	return evicted
}

// fairer reports whether a new connection of client should take a slot of
// the heaviest client: that one holds at least two more. l.mu is held.
func (l *fairListener) fairer(client netip.Addr) bool {
	_, n := l.heaviest()
	return n >= len(l.clients[client])+2
}

// heaviest is the client with the most open connections, and how many.
// l.mu is held.
func (l *fairListener) heaviest() (top netip.Addr, n int) {
	for a, conns := range l.clients {
		if len(conns) > n {
			top, n = a, len(conns)
		}
	}
	return top, n
}

// serve gives c a slot and hands it to Accept. l.mu is held.
func (l *fairListener) serve(c net.Conn, client netip.Addr) {
	sc := &slotConn{Conn: c, client: client}
	sc.free = func() { l.free(sc) }
	l.clients[client] = append(l.clients[client], sc)
	l.open++
	l.ready <- sc // never blocks: ready has room for every slot
}

// free gives sc's slot back (if it still holds one) to the first waiting
// connection.
func (l *fairListener) free(sc *slotConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.remove(sc) || l.closed || len(l.waiting) == 0 {
		return
	}
	c := l.waiting[0]
	l.waiting = l.waiting[1:]
	l.serve(c, clientOf(c))
}

// remove takes sc out of its client's slots; false if it held none (it was
// evicted before). l.mu is held.
func (l *fairListener) remove(sc *slotConn) bool {
	conns := l.clients[sc.client]
	for i, c := range conns {
		if c == sc {
			conns = append(conns[:i:i], conns[i+1:]...)
			if len(conns) == 0 {
				delete(l.clients, sc.client)
			} else {
				l.clients[sc.client] = conns
			}
			l.open--
			return true
		}
	}
	return false
}

// clientOf is c's source address (unmapped: a v4-mapped client is the same
// client as its v4 address).
func clientOf(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// slotConn gives its slot back once, on the first Close.
type slotConn struct {
	net.Conn
	client netip.Addr
	once   sync.Once
	free   func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
