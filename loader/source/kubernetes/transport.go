package kubernetes

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// The agent's HTTP/2 health check of its connection to the API server: a
// ping after pingAfterIdle without a frame from the server, and the
// connection closed (its watches end, the informers reconnect) when no
// answer comes within pingTimeout. A connection that goes silent without
// closing (a middlebox that lost the flow, an API server host that
// vanished) is noticed within pingAfterIdle + pingTimeout. client-go's
// own check is 30 s + 15 s (k8s.io/apimachinery v0.37.2
// pkg/util/net/http.go, readIdleTimeoutSeconds and pingTimeoutSeconds,
// set on golang.org/x/net/http2's Transport.ReadIdleTimeout and
// PingTimeout by configureHTTP2Transport): 45 s of a stale tree; without
// any, the kernel's TCP timeouts take minutes. A ping is 17 bytes each
// way on an idle connection and answered by the server's HTTP/2 read
// loop, not a handler.
//
// The timeout is not shorter because the check cannot tell a silent
// server from its own process starved of CPU (its read loop not run): 50
// agents on 2 cores at load 25–40 lost 17–25 watches to a 3 s timeout
// while they loaded 100,000 endpoints each, and each lost connection
// lists everything again — more load on an API server that may be the
// slow one (internal/testing/fanout).
const (
	pingAfterIdle = 5 * time.Second
	pingTimeout   = 10 * time.Second
)

// stallNoticed bounds how long after a connection to the API server goes
// silent the agent closes it (pingAfterIdle + pingTimeout).
const stallNoticed = pingAfterIdle + pingTimeout

// withHealthCheck returns cfg with a transport of its own that checks its
// HTTP/2 connection every pingAfterIdle: client-go's transport
// (k8s.io/client-go v0.37.2 transport/cache.go, tlsTransportCache.get:
// the same dialer, TLS handshake timeout and idle connections) with the
// health check set on its http2.Transport, which client-go lets a user
// set only through process-wide environment variables read when its
// shared transport is first made. A configuration whose credentials come
// from an exec or auth-provider plugin keeps client-go's transport: the
// plugin's client certificates need client-go's own.
func withHealthCheck(cfg *rest.Config) (*rest.Config, error) {
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.Transport != nil || cfg.Dial != nil {
		return cfg, nil
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	proxy := http.ProxyFromEnvironment
	if cfg.Proxy != nil {
		proxy = cfg.Proxy
	}
	t := utilnet.SetOldTransportDefaults(&http.Transport{
		Proxy: proxy, TLSClientConfig: tlsCfg, TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25, DisableCompression: cfg.DisableCompression,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	})
	t2, err := http2.ConfigureTransports(t)
	if err != nil {
		return nil, fmt.Errorf("%w: http/2: %w", ErrConfig, err)
	}
	t2.ReadIdleTimeout, t2.PingTimeout = pingAfterIdle, pingTimeout
	out := rest.CopyConfig(cfg)
	out.Transport, out.TLSClientConfig = t, rest.TLSClientConfig{}
	return out, nil
}
