// Package source is the contract between the agent and where its endpoints
// come from: a topology file, Kubernetes (loader/kubernetes), later xDS.
package source

import (
	"context"
	"time"

	"github.com/loctree/loctree/shared"
)

// Update is one new state of a source.
type Update struct {
	// Topology holds every service the source manages (sorted by name) and
	// the nodes it knows with their localities. Treat it as read-only:
	// unchanged services may share memory with earlier updates.
	Topology *shared.Topology
	// Locality is the locality of the agent's own node, nil while unknown.
	Locality shared.Locality
	// Changed names the services added, changed or removed since the previous
	// update, sorted; every service in the first update.
	Changed []string
	// LocalityChanged says Locality differs from the previous update's.
	LocalityChanged bool
	// Observed is when the source saw the first change this update carries
	// (Kubernetes: the arrival of its first informer event); zero when
	// unknown. The agent measures its change → kernel latency from it.
	Observed time.Time
}

// Source produces topologies. Run blocks until ctx ends (returning nil) or
// the source fails to start; it calls publish, on its own goroutine, with the
// first complete state and then once per (debounced) change. An agent builds
// each Update's Topology into the next generation of the tree, reinstalls
// only the Changed services and, when LocalityChanged, re-derives the source
// labels of every service from the new Locality.
type Source interface {
	Run(ctx context.Context, publish func(Update)) error
}
