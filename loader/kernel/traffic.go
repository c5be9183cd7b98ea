package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// TrafficTotals are counts of one traffic key (bpf/lib/traffic.h), or of
// the picks the programs could not key.
type TrafficTotals struct {
	// Picks are new picks: connections, and UDP sockets' first datagram
	// to a backend; a socket that keeps its backend is not counted again.
	Picks uint64
	// Sent and Received are the bytes of the redirected TCP connections
	// that have closed: the bytes the backend acknowledged and the bytes
	// it sent. A connection still open is not in them yet.
	Sent, Received uint64
}

// TrafficCount is the programs' count of new picks of one backend of one
// service by one source, and of their closed TCP connections' bytes.
type TrafficCount struct {
	// Source is the locality the connects looked the service up with: a
	// cgroup's own (SetCgroupLocality) or the node's. Nil when the cgroup
	// is one this agent did not set (an earlier agent's, re-adopted).
	Source   shared.Locality
	Cgroup   uint64         // the cgroup whose locality Source is; 0: the node's
	Frontend netip.AddrPort // the service's VIP
	Backend  netip.AddrPort // the picked endpoint
	TrafficTotals
}

// Traffic reads the traffic counts: per (source, service, backend), and
// the counts the programs could not key because the map was full
// (Capacity.Traffic), which a report shows as (other).
func (in *Installer) Traffic() (counts []TrafficCount, other TrafficTotals, err error) {
	in.trafficMu.Lock()
	node, cgroups := maps.Clone(in.trafficNode), maps.Clone(in.cgroupLocs)
	in.trafficMu.Unlock()
	err = in.k.eachTraffic(func(k *bpf.TrafficKey, t TrafficTotals) {
		c := TrafficCount{Source: node, Cgroup: k.Src, Frontend: addrPortOf(k.Fe), Backend: addrPortOf(k.Backend), TrafficTotals: t}
		if k.Src != 0 {
			c.Source = cgroups[k.Src]
		}
		counts = append(counts, c)
	})
	if err != nil {
		return nil, TrafficTotals{}, fmt.Errorf("read traffic counts: %w", err)
	}
	var per []bpf.TrafficVal
	if err := in.k.objs.LtTrafficOther.Lookup(uint32(0), &per); err != nil {
		return nil, TrafficTotals{}, fmt.Errorf("read traffic counts: %w", err)
	}
	return counts, sumTraffic(per), nil
}

// ForgetTraffic deletes the counts of keys the caller has read and will
// never see grow again (a backend or a service no installed tree has), so
// that endpoints that come and go (pod IPs) do not fill the map until
// every new key counts as (other). A count that grew after the caller
// read it loses that growth: call it only for keys of endpoints the
// programs can no longer pick. It returns how many of counts, from the
// first, the map no longer holds (all of them unless the error is not nil).
func (in *Installer) ForgetTraffic(counts []TrafficCount) (int, error) {
	for i, c := range counts {
		k := bpf.TrafficKey{Src: c.Cgroup, Fe: FrontendOf(c.Frontend), Backend: FrontendOf(c.Backend)}
		if err := in.k.objs.LtTraffic.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return i, fmt.Errorf("forget traffic counts: %w", err)
		}
	}
	return len(counts), nil
}

// trafficBatch is how many keys one batch lookup reads.
const trafficBatch = 1024

// eachTraffic calls f with every key of the traffic map and its per-CPU
// sum, read a batch of keys per system call (the agent reads them at each
// scrape and before each install: one lookup per key took 78 ms at 16,384
// keys, BenchmarkTraffic).
func (k *kernel) eachTraffic(f func(*bpf.TrafficKey, TrafficTotals)) error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	keys := make([]bpf.TrafficKey, trafficBatch)
	vals := make([]bpf.TrafficVal, trafficBatch*cpus)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := k.objs.LtTraffic.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			f(&keys[i], sumTraffic(vals[i*cpus:(i+1)*cpus]))
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// rememberCgroup keeps the locality a cgroup's connects are counted with.
// A cleared cgroup's is kept: its counts were made with it.
func (in *Installer) rememberCgroup(id uint64, loc shared.Locality) {
	if loc == nil {
		return
	}
	in.trafficMu.Lock()
	defer in.trafficMu.Unlock()
	in.cgroupLocs[id] = maps.Clone(loc)
}

// rememberNode keeps the node's locality for the traffic counts.
func (in *Installer) rememberNode(loc shared.Locality) {
	in.trafficMu.Lock()
	defer in.trafficMu.Unlock()
	in.trafficNode = maps.Clone(loc)
}

// addrPortOf is the address and port of a frontends or conns map key
// (FrontendOf's inverse).
func addrPortOf(a bpf.Backend) netip.AddrPort {
	var raw [16]byte
	for i, w := range a.Addr {
		binary.NativeEndian.PutUint32(raw[4*i:], w)
	}
	var port [2]byte
	binary.NativeEndian.PutUint16(port[:], a.Port)
	addr := netip.AddrFrom16(raw)
	if a.Family == 4 {
		addr = netip.AddrFrom4([4]byte(raw[:4]))
	}
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(port[:]))
}

// sumTraffic adds up a traffic value's per-CPU copies.
func sumTraffic(per []bpf.TrafficVal) TrafficTotals {
	var t TrafficTotals
	for _, v := range per {
		t.Picks += v.Picks
		t.Sent += v.Sent
		t.Received += v.Received
	}
	return t
}
