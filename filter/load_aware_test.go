package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// loadAwareStreams starts the real filter on a proxy in r1/z1 for a
// load_aware service (band [1, 2] per endpoint) with two endpoints in r1/z1,
// four in r1/z2 and two in r2/z3, and returns a function that opens a stream
// to it and says where the filter sent it (streamsTo).
func loadAwareStreams(t *testing.T) func() (*host.Stream, string) {
	cfg := `{"topology":{"services":[{"name":"la","scopes":["region","zone"],"load_aware":{"high":2,"low":1},"endpoints":[
	  {"address":"127.0.5.1:80","locality":{"region":"r1","zone":"z1"}},{"address":"127.0.5.2:80","locality":{"region":"r1","zone":"z1"}},
	  {"address":"127.0.5.3:80","locality":{"region":"r1","zone":"z2"}},{"address":"127.0.5.4:80","locality":{"region":"r1","zone":"z2"}},
	  {"address":"127.0.5.5:80","locality":{"region":"r1","zone":"z2"}},{"address":"127.0.5.6:80","locality":{"region":"r1","zone":"z2"}},
	  {"address":"127.0.5.7:80","locality":{"region":"r2","zone":"z3"}},{"address":"127.0.5.8:80","locality":{"region":"r2","zone":"z3"}}]}]},
	  "locality":{"region":"r1","zone":"z1"}}`
	return streamsTo(t, cfg, "la")
}

// zoneOf is the zone of a loadAwareStreams endpoint.
func zoneOf(addr string) string {
	switch {
	case strings.HasPrefix(addr, "127.0.5.1:") || strings.HasPrefix(addr, "127.0.5.2:"):
		return "z1"
	case strings.HasPrefix(addr, "127.0.5.7:") || strings.HasPrefix(addr, "127.0.5.8:"):
		return "z3"
	}
	return "z2"
}

// zonesOf opens n streams, each ended at once, and counts where they went.
func zonesOf(open func() (*host.Stream, string), n int) map[string]int {
	got := map[string]int{}
	for range n {
		s, addr := open()
		got[zoneOf(addr)]++
		s.Close()
	}
	return got
}

// TestLoadAwareWidensInFilter: with requests held in flight on the proxy's
// zone, the real .wasm keeps the next ones local up to the band's high edge
// (2 per endpoint: 4 on z1's two), sends them to the region (r1, one level
// up) above it, keeps doing so between the edges, and comes back to the
// zone below the low edge (1 per endpoint: 2). Never to r2: the region's
// six endpoints hold far less than 2 each.
func TestLoadAwareWidensInFilter(t *testing.T) {
	open := loadAwareStreams(t)
	var held []*host.Stream
	for i := range 5 { // the 5th still sees 4 in flight: on the edge, local
		s, addr := open()
		if zoneOf(addr) != "z1" {
			t.Fatalf("stream %d with %d in flight went to %s, want z1", i+1, i, addr)
		}
		held = append(held, s)
	}
	const n = 60 // each goes to z1 with probability 1/3 once wide: all 60 by chance 1 in 4e28
	if got := zonesOf(open, n); got["z2"] == 0 || got["z3"] != 0 || got["z1"]+got["z2"] != n {
		t.Fatalf("5 in flight on z1 (above 4): %v; want r1's zones, z2 among them", got)
	}
	held[0].Close()
	held[1].Close()
	if got := zonesOf(open, n); got["z2"] == 0 || got["z3"] != 0 {
		t.Fatalf("3 in flight, between the edges: %v; want r1 still", got)
	}
	held[2].Close()
	held[3].Close()
	if got := zonesOf(open, n); got["z1"] != n {
		t.Fatalf("1 in flight, below the low edge: %v; want z1 alone", got)
	}
	held[4].Close()
}

// BenchmarkFilterRequestLoadAware is BenchmarkFilterRequest's 10,000
// endpoints without and with load_aware, in one run (the ratio is the cost
// of the counts and the band: docs/PERFORMANCE.md).
func BenchmarkFilterRequestLoadAware(b *testing.B) {
	for _, la := range []bool{false, true} {
		b.Run(fmt.Sprintf("load_aware=%v", la), func(b *testing.B) {
			top := benchTopology(10000)
			if la {
				top.Services[0].LoadAware = &shared.LoadAwareSpec{}
			}
			benchFilterRequest(b, fetchedHost(b, top, host.Options{}))
		})
	}
}
