// Package httpserve builds HTTP servers that face clients they do not
// control (the agent's tree server, `wasm serve`): every phase of a
// connection has a deadline, and the number of open connections is capped
// below the process's file limit, so idle or slow clients cannot hold file
// descriptors the process needs for its own work, and shared between
// clients, so one client that holds many connections (slowloris, or
// requests whose answers it never reads) cannot keep another out.
package httpserve

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Limits of one server. Zero durations are not allowed to mean "none":
// New fills them from Default.
type Limits struct {
	ReadHeader time.Duration // from accept (or the end of the last request) to the end of the headers
	Read       time.Duration // the whole request, body included
	Write      time.Duration // from the end of the request headers to the end of the response
	Idle       time.Duration // a keep-alive connection waiting for its next request
	MaxConns   int           // connections open at once; more wait in the listen backlog
}

// Default limits: Go's http.Server has none of these by default.
var Default = Limits{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 60 * time.Second, MaxConns: 1024}

// New returns a server for h with l's deadlines.
func New(h http.Handler, l Limits) *http.Server {
	l = l.withDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeader, ReadTimeout: l.Read, WriteTimeout: l.Write, IdleTimeout: l.Idle}
}

func (l Limits) withDefaults() Limits {
	or := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	return Limits{or(l.ReadHeader, Default.ReadHeader), or(l.Read, Default.Read), or(l.Write, Default.Write),
		or(l.Idle, Default.Idle), l.MaxConns}
}

// Describe is the limits as a log value.
func Describe(l Limits) string {
	l = l.withDefaults()
	return fmt.Sprintf("read-header %s, read %s, write %s, idle %s, %d connections", l.ReadHeader, l.Read, l.Write, l.Idle, l.MaxConns)
}

// Listen listens on addr and serves at most maxConns connections at once
// (0: Default.MaxConns), and never more than half the process's open-file
// limit: the other half stays for the process's own files and sockets. The
// connections are shared fairly between clients (source addresses): see
// fairListener.
func Listen(addr string, maxConns int) (net.Listener, error) {
	if maxConns <= 0 {
		maxConns = Default.MaxConns
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newFairListener(ln, capToFiles(maxConns)), nil
}
