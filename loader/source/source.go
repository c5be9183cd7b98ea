// Package source is the contract between the agent and where its endpoints
// come from: a topology file or directory (loader/source/file), Kubernetes
// (loader/source/kubernetes) or istiod's workload discovery over xDS
// (loader/source/xds). The agent has one loop for all of
// them (loader.Run): it builds the services an Update names, installs them
// into the kernel, serves the tree and exports metrics.
package source

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/loctree/loctree/shared"
)

// Update is one new state of a source, as the services that changed since
// the last update the agent applied.
type Update struct {
	// Changed names the services added, changed or removed since the last
	// update the agent applied, sorted; every service in the first update.
	Changed []string
	// Services reads the source's services by name: every service named in
	// Changed (a removed one is one it does not have), and, unless Whole,
	// any other service it manages.
	Services Services
	// Topology, when the source keeps every service decoded (Kubernetes),
	// holds them all (sorted by name) and the nodes it knows; nil for a
	// source that does not (the topology file). The agent reads services
	// only through Services. Treat it as read-only: unchanged services may
	// share memory with earlier updates.
	Topology *shared.Topology
	// Whole says the update is applied whole or not at all: when the tree
	// refuses one of its services, the agent rejects the update (a topology
	// file's rule: a bad file changes nothing). Otherwise a service the tree
	// refuses is refused alone, keeps its last installed version, and is
	// tried again with every later update (a Kubernetes object's rule: one
	// bad object does not hold back the others).
	Whole bool
	// Err, when set, says the source's new state cannot be read (a topology
	// file that does not parse); nothing else is set. The agent keeps the
	// installed tree, logs Err and counts a rejected update.
	Err error
	// Nodes are every node the source knows (a topology's nodes:,
	// Kubernetes Nodes), nil when it knows none. The agent reads them only
	// for the tree's warnings: a failover from region that no endpoint and
	// no node has.
	Nodes []shared.NodeSpec
	// Locality is the locality of the agent's own node, nil while unknown
	// (or when the source does not know nodes: the agent's --locality).
	Locality shared.Locality
	// LocalityChanged says Locality differs from the previous update's.
	LocalityChanged bool
	// Observed is when the source saw the first change this update carries
	// (Kubernetes: the arrival of its first informer event; a topology file:
	// the poll that found it changed); zero when unknown. The agent measures
	// its change → kernel latency from it.
	Observed time.Time
}

// Services reads a source's services by name.
type Services interface {
	// Has reports whether the source has the service, without decoding it.
	Has(name string) bool
	// Spec returns the service's spec, which the caller must not modify. A
	// source that keeps its services encoded decodes it on each call; the
	// error then names the file and line.
	Spec(name string) (*shared.ServiceSpec, error)
}

// Source produces topologies. Run blocks until ctx ends (returning nil) or
// the source fails (before its first update: it cannot start); it calls
// publish, on its own goroutine, with the first complete state and then
// once per (debounced) change. publish returns when the agent has applied
// the update (nil), or with the reason it rejected it, or ctx's error; a
// source computes its next update against the last one the agent applied,
// so a rejected update's changes are carried by the next. An agent builds
// the Changed services into the next generation of the tree, reinstalls
// only those and, when LocalityChanged, re-derives the source labels of
// every service from the new Locality.
type Source interface {
	Run(ctx context.Context, publish func(Update) error) error
}

// Health is implemented by a source that can tell whether it reaches where
// its state comes from (the Kubernetes source: the API server). Health
// returns nil, or why not; meanwhile the agent keeps serving its last
// tree, and reports the reason in /healthz (still 200: restarting the
// agent would not bring the API server back) and loctree_source_up 0.
type Health interface {
	Health() error
}

// TopologyServices reads the services of a topology whose services are
// sorted by name.
func TopologyServices(t *shared.Topology) Services { return sorted{t} }

type sorted struct{ t *shared.Topology }

func (s sorted) find(name string) (int, bool) {
	return slices.BinarySearchFunc(s.t.Services, name, func(s shared.ServiceSpec, n string) int { return cmp.Compare(s.Name, n) })
}

func (s sorted) Has(name string) bool {
	_, ok := s.find(name)
	return ok
}

func (s sorted) Spec(name string) (*shared.ServiceSpec, error) {
	i, ok := s.find(name)
	if !ok {
		return nil, fmt.Errorf("no service %q", name)
	}
	return &s.t.Services[i], nil
}

// Metrics is implemented by a source with metrics of its own (the xDS
// source: its stream, versions, NACKs and resources). WriteMetrics writes
// them in the Prometheus text format; the agent appends them to /metrics.
type Metrics interface {
	WriteMetrics(w io.Writer) error
}
