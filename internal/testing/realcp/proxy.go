package realcp

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from a listener of its own on 127.0.0.1
// to a target (the API server), and can blackhole them as a network can:
// Blackhole makes every established connection go silent — bytes either
// way are read and dropped, nothing is closed, so neither end learns of it
// from TCP — and refuses new connections (closes them at once), as a load
// balancer with no backend left does; Heal forwards new connections again.
// Silenced connections stay silent until an end closes them: the client
// has to notice on its own and reconnect.
type Proxy struct {
	ln     net.Listener
	target string

	mu         sync.Mutex
	conns      map[*proxied]struct{}
	blackholed bool
	wg         sync.WaitGroup
}

// proxied is one forwarded connection: its two sides, silenced by a
// blackhole.
type proxied struct {
	client, server net.Conn
	silent         atomic.Bool
}

// StartProxy listens on a free port of 127.0.0.1 and forwards every
// connection to target.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxied]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.blackholed
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward dials the target for client and copies both ways until either
// side ends; then it closes both.
func (p *Proxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	c := &proxied{client: client, server: server}
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Go(func() { c.copy(server, client) })
	both.Go(func() { c.copy(client, server) })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// copy forwards src to dst, dropping what it reads once c is silenced; at
// the end of either side it closes both, so the other copy ends too.
func (c *proxied) copy(dst, src net.Conn) {
	defer c.client.Close()
	defer c.server.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF, a reset or Close: the connection is over
			return
		}
	}
}

// Blackhole silences every established connection and refuses new ones
// until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackholed = true
	for c := range p.conns {
		c.silent.Store(true)
	}
}

// Heal forwards new connections again; the silenced ones stay silent.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackholed = false
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
