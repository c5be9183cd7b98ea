package xds

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/structpb"
)

// The backoff between connection attempts: ztunnel's INITIAL_BACKOFF and
// MAX_BACKOFF (src/xds/client.rs), doubled per failed attempt, with jitter
// (a wait is uniform in [b/2, b]) so that the agents of a cluster do not
// reconnect in step after istiod restarts.
const (
	DefaultInitialBackoff = 10 * time.Millisecond
	DefaultMaxBackoff     = 15 * time.Second
)

// The keepalive ztunnel's control-plane channel uses (src/tls/control.rs
// grpc_connector at 4878635e: HTTP/2 keepalive interval 30 s, timeout 10 s),
// which are also istiod's own (pkg/keepalive DefaultOption).
const (
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultKeepaliveTimeout = 10 * time.Second
)

// maxMessage is the largest response accepted: ztunnel's
// max_decoding_message_size (src/xds/client.rs), 200 MiB.
const maxMessage = 200 << 20

// client is a delta ADS client of one type, WDS, as ztunnel's AdsClient
// (istio/ztunnel src/xds/client.rs at 62d826530e5c): a wildcard
// subscription (no names) on each stream, every response ACKed or NACKed
// with the reasons of the resources it rejected, the versions of the
// resources it holds sent back as initial_resource_versions when it
// reconnects, so that istiod need not resend what did not change.
type client struct {
	cfg      *Config
	st       *store
	stats    *stats
	versions map[string]string // resource name → the version istiod last sent; owned by run
}

// run connects and reconnects until ctx ends. Each attempt dials a new
// connection, as ztunnel makes a new channel per attempt (run_internal):
// a gRPC connection that failed would otherwise refuse new streams until
// its own reconnect backoff (gRPC's: 1 s, growing to 120 s) let it dial
// again, and that backoff, not this one, would decide when the agent gets
// istiod back.
func (c *client) run(ctx context.Context) {
	backoff := c.cfg.InitialBackoff
	for ctx.Err() == nil {
		got, err := c.attempt(ctx)
		c.stats.disconnected(err)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = c.cfg.InitialBackoff // the stream worked: reconnect at once, as ztunnel after Ok
		}
		c.cfg.Logger.Warn("xds stream ended; reconnecting", "address", c.cfg.Address, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(backoff)):
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// attempt dials istiod and runs one stream on the new connection.
func (c *client) attempt(ctx context.Context) (got bool, err error) {
	conn, err := c.cfg.dial()
	if err != nil {
		return false, err
	}
	defer conn.Close()
	return c.stream(ctx, conn)
}

func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// stream runs one ADS stream; got says whether a response arrived.
func (c *client) stream(ctx context.Context, conn *grpc.ClientConn) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("open the ADS stream: %w", err)
	}
	if err := ads.Send(c.initialRequest()); err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	for {
		resp, err := ads.Recv()
		if err != nil {
			return got, err
		}
		if !got {
			c.stats.connected()
			got = true
		}
		if err := ads.Send(c.handle(resp)); err != nil {
			return got, fmt.Errorf("answer %s: %w", resp.GetNonce(), err)
		}
	}
}

// initialRequest subscribes to every WDS resource (ztunnel's
// construct_initial_request without on-demand: no names), naming the
// resources held and their versions.
func (c *client) initialRequest() *discoveryv3.DeltaDiscoveryRequest {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: AddressType, Node: c.cfg.node()}
	if len(c.versions) > 0 {
		req.InitialResourceVersions = make(map[string]string, len(c.versions))
		for name, v := range c.versions {
			req.InitialResourceVersions[name] = v
		}
	}
	return req
}

// handle applies a response and returns its ACK, or its NACK naming every
// rejected resource (ztunnel's handle_stream_event: the reasons joined by
// "; " in error_detail). The resources that were accepted stay applied.
func (c *client) handle(resp *discoveryv3.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryRequest {
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
	var bad []rejected
	if resp.GetTypeUrl() != AddressType {
		bad = []rejected{{resp.GetTypeUrl(), "a type this client did not subscribe to"}}
	} else {
		bad = c.st.apply(resp)
		c.remember(resp, bad)
	}
	if len(bad) == 0 {
		c.stats.acked(resp)
		return ack
	}
	reasons := make([]string, len(bad))
	for i, r := range bad {
		reasons[i] = r.String()
	}
	msg := strings.Join(reasons, "; ")
	ack.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: msg}
	c.stats.nacked()
	c.cfg.Logger.Error("xds: rejected resources (NACK); the others are applied", "nonce", resp.GetNonce(), "rejected", msg)
	return ack
}

// remember keeps the versions of the accepted resources for the next
// stream's initial_resource_versions.
func (c *client) remember(resp *discoveryv3.DeltaDiscoveryResponse, bad []rejected) {
	skip := map[string]bool{}
	for _, r := range bad {
		skip[r.name] = true
	}
	for _, r := range resp.GetResources() {
		if !skip[r.GetName()] {
			c.versions[r.GetName()] = r.GetVersion()
		}
	}
	for _, name := range resp.GetRemovedResources() {
		delete(c.versions, name)
	}
}

// node is the xDS Node as ztunnel builds it (src/xds/client.rs node()): id
// ztunnel~IP~POD.NS~NS.svc.cluster.local, which istiod reads as a ztunnel
// proxy and serves WDS, and the metadata NAME, NAMESPACE, INSTANCE_IPS,
// NODE_NAME and CLUSTER_ID (ztunnel's proxy metadata ISTIO_META_CLUSTER_ID).
func (cfg *Config) node() *corev3.Node {
	meta, _ := structpb.NewStruct(map[string]any{
		"NAME": cfg.PodName, "NAMESPACE": cfg.Namespace, "INSTANCE_IPS": cfg.InstanceIP,
		"NODE_NAME": cfg.NodeName, "CLUSTER_ID": cfg.ClusterID,
	})
	return &corev3.Node{
		Id:       fmt.Sprintf("ztunnel~%s~%s.%s~%s.svc.cluster.local", cfg.InstanceIP, cfg.PodName, cfg.Namespace, cfg.Namespace),
		Metadata: meta,
	}
}

// dial makes the gRPC connection: plaintext, or TLS with a bearer token
// read from TokenFile on every stream (a projected token rotates) and the
// clusterid header, as ztunnel's AuthSource::Token (src/identity/auth.rs).
func (cfg *Config) dial() (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout})}
	if cfg.TLS == nil {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS)))
	}
	if cfg.TokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenAuth{file: cfg.TokenFile, cluster: cfg.ClusterID, secure: cfg.TLS != nil}))
	}
	conn, err := grpc.NewClient(cfg.Address, opts...)
	if err != nil {
		return nil, fmt.Errorf("xds address %q: %w", cfg.Address, err)
	}
	return conn, nil
}

// tokenAuth sends the token file's content as a bearer token.
type tokenAuth struct {
	file, cluster string
	secure        bool
}

func (t tokenAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(t.file)
	if err != nil {
		return nil, fmt.Errorf("read the xds token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, fmt.Errorf("the xds token file %s is empty", t.file)
	}
	return map[string]string{"authorization": "Bearer " + tok, "clusterid": t.cluster}, nil
}

func (t tokenAuth) RequireTransportSecurity() bool { return t.secure }
