package xds

import (
	"fmt"
	"io"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/loctree/loctree/internal/promtext"
)

// stats are the xDS client's state for /metrics and Health.
type stats struct {
	mu           sync.Mutex
	up           bool
	lastErr      error
	downSince    time.Time
	connects     uint64
	ackedVersion string // the system_version_info of the last ACKed response
	ackedNonce   string
	nacks        uint64
	refused      int // WDS services the tree cannot hold (mapping.go)
}

func (s *stats) connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up, s.lastErr = true, nil
	s.connects++
}

func (s *stats) disconnected(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up || s.downSince.IsZero() {
		s.downSince = time.Now()
	}
	s.up, s.lastErr = false, err
}

func (s *stats) acked(resp *discoveryv3.DeltaDiscoveryResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackedVersion, s.ackedNonce = resp.GetSystemVersionInfo(), resp.GetNonce()
}

func (s *stats) nacked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nacks++
}

func (s *stats) setRefused(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = n
}

// health is nil while a stream is up, else why not and since when.
func (s *stats) health(address string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up {
		return nil
	}
	if s.downSince.IsZero() {
		return fmt.Errorf("xds %s: connecting", address)
	}
	return fmt.Errorf("xds %s: no stream for %v: %v", address, time.Since(s.downSince).Round(time.Millisecond), s.lastErr)
}

// write writes the metrics in the Prometheus text format.
func (s *stats) write(w io.Writer, workloads, services int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := promtext.New(w)
	p.Metric("loctree_xds_connected", "gauge", "1 while the ADS stream to istiod is up.", b2f(s.up))
	p.Metric("loctree_xds_connects_total", "counter", "ADS streams that received a response (1 + reconnects).", float64(s.connects))
	p.Head("loctree_xds_last_acked", "gauge", "The last ACKed WDS response, by its system_version_info and nonce (value: 1).")
	p.Printf("loctree_xds_last_acked{version=%q,nonce=%q} 1\n", s.ackedVersion, s.ackedNonce)
	p.Metric("loctree_xds_nacks_total", "counter", "WDS responses NACKed (a resource that does not decode; the log and error_detail name it, the rest applied).", float64(s.nacks))
	p.Metric("loctree_xds_workloads", "gauge", "WDS workloads held.", float64(workloads))
	p.Metric("loctree_xds_services", "gauge", "WDS services held (managed or not).", float64(services))
	p.Metric("loctree_xds_services_unmappable", "gauge", "WDS services the tree cannot hold (a CIDR VIP, an endpoint only reachable by DNS or through a network gateway); each keeps its last tree services, the log says why once.", float64(s.refused))
	_, err := p.Written()
	return err
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
