package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// Load-aware widening in the kernel (bpf/lib/widen.h; docs/TOPOLOGY.md,
// "Load-aware widening"). The programs count a node's open connections in
// the lt_widen map under the node's stable key, (hash of the service's
// name, hash of its scope keys and labels from the root), which every copy
// of the service's tree shares: counts and states carry across updates,
// and a socket gives back what it added however many updates came since.
// The loader writes, after a load-aware service's child table, one record
// per node of its tree (its key and parent) and the leaf of each endpoint;
// creates the entries of a tree's paths before publishing it, keeping
// entries that exist; and deletes an entry once no published or retired
// tree names it and its count is 0, so a program finds every node of its
// tree, and no entry goes while a socket counts on it. A socket records how
// many nodes its connect counted, and its close takes back from those.

// The widening records' constants, as bpf/lib/widen.h defines them
// (TestWidenConstantsMatchHeader compares them).
const (
	widenLeaves = 6          // LT_WIDEN_LEAVES: leaf indices per node map entry
	widenRoot   = ^uint32(0) // LT_WIDEN_ROOT: the parent of the root
)

// widenSvc is the service half of a node's key: a hash of the name, which
// survives updates, removal and an agent restart, and is never 0 (0 marks
// a socket that counts nothing).
func widenSvc(s *shared.Service) uint64 { return max(shared.Label(s.Name()), 1) }

// widenStep is the path of a child labelled label at scope key scope under
// a node of path parent: never 0 (0 is the root's path, and the end of a
// walk up).
func widenStep(parent, scope, label uint64) uint64 {
	return max(widenMix(parent^widenMix(scope^widenMix(label))), 1)
}

// widenMix is SplitMix64's finalizer: every input bit moves every output bit.
func widenMix(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// widenLen is the node map entries of s's widening records: one per node
// of its tree, then its endpoints' leaves, widenLeaves per entry; 0 for a
// service that does not widen.
func widenLen(s *shared.Service) uint32 {
	if _, _, ok := s.LoadAware(); !ok {
		return 0
	}
	return layoutOf(s).NodeCount + (epLen(s)+widenLeaves-1)/widenLeaves
}

// widenRecords are s's widening records (struct lt_widen_node per node of
// its tree, from the root, then struct lt_widen_leaves), or nil.
func widenRecords(t *shared.Tree, s *shared.Service) ([]byte, error) {
	if widenLen(s) == 0 {
		return nil, nil
	}
	w, err := walkWiden(t, s)
	if err != nil {
		return nil, err
	}
	le, svc := binary.LittleEndian, widenSvc(s)
	out := make([]byte, 0, int(widenLen(s))*wire.NodeRecordSize)
	for n := range w.path {
		out = le.AppendUint32(le.AppendUint32(le.AppendUint64(le.AppendUint64(out, svc), w.path[n]), w.parent[n]), 0)
	}
	for i := range (len(w.leaves) + widenLeaves - 1) / widenLeaves * widenLeaves {
		leaf := uint32(0)
		if i < len(w.leaves) {
			leaf = w.leaves[i]
		}
		out = le.AppendUint32(out, leaf)
	}
	return out, nil
}

// widenTree is what the widening records hold of a tree: by node index
// from the root, its path and its parent; by endpoint index, its leaf.
type widenTree struct {
	path   []uint64
	parent []uint32
	leaves []uint32
}

// walkWiden computes s's widenTree. Nodes are breadth-first, so a parent's
// path is known before its children's, and a deeper node's range
// overwrites its ancestors' as an endpoint's leaf. Two nodes with one path
// (a 64-bit hash collision) are an error.
func walkWiden(t *shared.Tree, s *shared.Service) (widenTree, error) {
	l, le := layoutOf(s), binary.LittleEndian
	nodes, _ := records(t, s)
	keys := scopeKeys(s)
	w := widenTree{make([]uint64, l.NodeCount), make([]uint32, l.NodeCount), make([]uint32, epLen(s))}
	depth, seen := make([]uint8, l.NodeCount), map[uint64]bool{}
	w.parent[0] = widenRoot
	for n := range l.NodeCount {
		rec := nodes[n*wire.NodeRecordSize:][:wire.NodeRecordSize]
		first, count := le.Uint32(rec[wire.NFirstChild:]), le.Uint32(rec[wire.NChildCount:])
		for c := range count {
			c += first - l.Root
			label := le.Uint64(nodes[c*wire.NodeRecordSize+wire.NLabel:])
			w.path[c], depth[c], w.parent[c] = widenStep(w.path[n], keys[depth[n]], label), depth[n]+1, n
			if seen[w.path[c]] {
				return w, fmt.Errorf("service %s: two nodes with one load-aware key %#x (a 64-bit hash collision): rename a locality value", s.Name(), w.path[c])
			}
			seen[w.path[c]] = true
		}
		for ep := le.Uint32(rec[wire.NLo:]); ep < le.Uint32(rec[wire.NHi:]); ep++ {
			w.leaves[ep-l.EpFirst] = n
		}
	}
	return w, nil
}

// widenNode is one decoded widening record: a node's key and its parent's
// index from the root.
type widenNode struct {
	key    bpf.WidenKey
	parent uint32
}

// decodeWidenNodes reads count node records of struct lt_widen_node.
func decodeWidenNodes(b []byte, count uint32) []widenNode {
	le := binary.LittleEndian
	out := make([]widenNode, count)
	for i := range out {
		rec := b[i*wire.NodeRecordSize:]
		out[i] = widenNode{bpf.WidenKey{Svc: le.Uint64(rec), Path: le.Uint64(rec[8:])}, le.Uint32(rec[16:])}
	}
	return out
}

// setWiden fills the widening fields of v, whose node region is written at
// map index nb: the band, and where the records sit (after the child
// table, at the region's end).
func setWiden(v *bpf.Service, p plan, nb uint32) {
	high, low, ok := p.svc.LoadAware()
	if !ok {
		return
	}
	v.LoadHigh, v.LoadLow = uint16(high), uint16(low)
	v.Widen = nb + regionLen(p) - widenLen(p.svc)
	v.WidenLeaves = v.Widen + layoutOf(p.svc).NodeCount
}

// createCounts makes the lt_widen entries of p's tree's paths that do not
// exist yet, count 0 and narrow; existing ones keep their counts and
// state. It runs before the tree is published.
func (in *Installer) createCounts(p plan) error {
	n := widenLen(p.svc)
	if n == 0 {
		return nil
	}
	nodes := decodeWidenNodes(p.region[len(p.region)-int(n)*wire.NodeRecordSize:], layoutOf(p.svc).NodeCount)
	if err := in.createEntries(nodes); err != nil {
		return fmt.Errorf("service %s: %w", p.svc.Name(), err)
	}
	return nil
}

// createEntries makes the entries of nodes, a tree's widening records,
// that do not exist yet.
func (in *Installer) createEntries(nodes []widenNode) error {
	for _, w := range nodes {
		if w.parent == widenRoot || w.parent >= uint32(len(nodes)) {
			continue // the root is never counted: nothing widens above it
		}
		v := bpf.WidenVal{Parent: nodes[w.parent].key}
		if nodes[w.parent].parent == widenRoot {
			v.Parent.Path = 0 // the walk up ends below the root
		}
		err := in.k.objs.LtWiden.Update(&w.key, &v, ebpf.UpdateNoExist)
		switch {
		case errors.Is(err, ebpf.ErrKeyExist):
		case errors.Is(err, unix.E2BIG): // a full hash map (kernel/bpf/hashtab.c, alloc_htab_elem)
			return fmt.Errorf("%w: the load-aware counts are full (%d entries, one per node of every load-aware tree installed or retired)",
				ErrCapacity, in.k.objs.LtWiden.MaxEntries())
		case err != nil:
			return fmt.Errorf("create load-aware counts: %w", err)
		}
	}
	return nil
}

// adoptCounts makes the missing entries of the load-aware trees an earlier
// agent installed: the counts map may be new (replaced with the sockets
// map) while the trees were re-adopted.
func (in *Installer) adoptCounts() error {
	for _, v := range in.installed {
		nodes, err := in.widenNodes(v)
		if err != nil {
			return err
		}
		if err := in.createEntries(nodes); err != nil {
			return err
		}
	}
	return nil
}

// widenNodes are the widening records of the installed or retired service
// value v, read from its node region; nil when it does not widen.
func (in *Installer) widenNodes(v bpf.Service) ([]widenNode, error) {
	if v.LoadHigh == 0 || v.WidenLeaves < v.Widen {
		return nil, nil
	}
	b := make([]byte, int(v.WidenLeaves-v.Widen)*wire.NodeRecordSize)
	if _, err := in.k.nodes.ReadAt(b, int64(v.Widen)*wire.NodeRecordSize); err != nil {
		return nil, fmt.Errorf("read load-aware records: %w", err)
	}
	return decodeWidenNodes(b, v.WidenLeaves-v.Widen), nil
}

// widenKeys are the counted keys (every node's but the root's) of the
// installed or retired service value v.
func (in *Installer) widenKeys(v bpf.Service) ([]bpf.WidenKey, error) {
	nodes, err := in.widenNodes(v)
	var out []bpf.WidenKey
	for _, w := range nodes {
		if w.parent != widenRoot {
			out = append(out, w.key)
		}
	}
	return out, err
}

// orphanCounts notes the keys of a retired value whose grace period has
// ended: candidates for deletion once no tree names them and their count
// is 0 (sweepCounts).
func (in *Installer) orphanCounts(v bpf.Service) {
	keys, err := in.widenKeys(v)
	if err != nil {
		in.log.Warn("load-aware counts of a retired tree are kept", "err", err)
	}
	for _, k := range keys {
		in.orphans[k] = true
	}
}

// sweepCounts deletes the orphaned entries that no installed or retired
// tree names and that count no open connection. One with connections open
// stays an orphan until they close. The first sweep of an agent makes the
// entries of the trees it re-adopted and takes every entry as an orphan:
// an earlier agent's orphans are not known.
func (in *Installer) sweepCounts() error {
	if !in.swept {
		if err := in.adoptCounts(); err != nil {
			return err
		}
		if err := in.adoptOrphans(); err != nil {
			return err
		}
		in.swept = true
	}
	idle, err := in.idleOrphans()
	if err != nil || len(idle) == 0 {
		return err
	}
	live, err := in.liveCounts()
	if err != nil {
		return err
	}
	for _, k := range idle {
		delete(in.orphans, k)
		if live[k] {
			continue
		}
		if err := in.k.objs.LtWiden.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete load-aware count: %w", err)
		}
	}
	return nil
}

// idleOrphans are the orphans that count no open connection (those gone
// from the map are no orphans any more): one lookup each, so orphans kept
// by open connections cost an apply no read of the installed trees.
func (in *Installer) idleOrphans() ([]bpf.WidenKey, error) {
	var idle []bpf.WidenKey
	for k := range in.orphans {
		var v bpf.WidenVal
		err := in.k.objs.LtWiden.Lookup(&k, &v)
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			delete(in.orphans, k)
		case err != nil:
			return nil, fmt.Errorf("read load-aware count: %w", err)
		case v.Count == 0:
			idle = append(idle, k)
		}
	}
	return idle, nil
}

// adoptOrphans takes every entry of lt_widen as an orphan.
func (in *Installer) adoptOrphans() error {
	var k bpf.WidenKey
	var v bpf.WidenVal
	it := in.k.objs.LtWiden.Iterate()
	for it.Next(&k, &v) {
		in.orphans[k] = true
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read load-aware counts: %w", err)
	}
	return nil
}

// liveCounts are the keys the installed and the retired trees name.
func (in *Installer) liveCounts() (map[bpf.WidenKey]bool, error) {
	live := map[bpf.WidenKey]bool{}
	add := func(v bpf.Service) error {
		keys, err := in.widenKeys(v)
		for _, k := range keys {
			live[k] = true
		}
		return err
	}
	for _, v := range in.installed {
		if err := add(v); err != nil {
			return nil, err
		}
	}
	for _, r := range in.retired {
		if err := add(r.svc); err != nil {
			return nil, err
		}
	}
	return live, nil
}
