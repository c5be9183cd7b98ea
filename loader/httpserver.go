package loader

import (
	"net"
	"net/http"
	"time"

	"github.com/loctree/loctree/internal/httpserve"
)

// serverLimits bound the agent's HTTP server. Its clients are the node's
// proxies polling /v1/tree every few seconds and a metrics scraper: a
// connection idle for 15s is closed, and at most 256 are open at once (and
// never more than half the open-file limit, which keeps the rest for the
// agent's own files and BPF objects), shared fairly between clients so that
// one flooding client cannot keep the proxies from /healthz and /v1/tree
// (httpserve.Listen).
var serverLimits = httpserve.Limits{
	ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second,
	Idle: 15 * time.Second, MaxConns: 256,
}

func newHTTPServer(h http.Handler) *http.Server { return httpserve.New(h, serverLimits) }

func listenHTTP(addr string) (net.Listener, error) {
	return httpserve.Listen(addr, serverLimits.MaxConns)
}

// listenLog is the listen address for the agent's log: none with --once,
// which serves nothing.
func (a *agent) listenLog() string {
	if a.cfg.Once || a.cfg.Listen == "" {
		return "none"
	}
	return a.cfg.Listen
}
