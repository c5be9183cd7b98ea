package shared

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/loctree/loctree/shared/wire"
)

// Builder keeps a tree and changes it one service at a time: Update builds
// only the services it is given and copies the records of the others into
// the next blob (a copy and an index shift per node, no parsing, sorting or
// hashing of unchanged services). The result is byte-for-byte what Build
// makes of the same topology. The zero Builder is empty and ready to use;
// a Builder is not safe for concurrent use.
type Builder struct {
	chunks map[string]*chunk // by service name
	order  []string          // service names, sorted
	names  map[string]string // name or host → service
	vips   map[netip.AddrPort]string
	labels map[uint64]labelUse // every node label of the tree → its value
	nodes  int                 // node records of all services
	eps    int                 // endpoint records of all services
	aux    int                 // aux node records (degraded and unhealthy trees) of all services
	meta   int                 // bytes of the strings section
	tree   *Tree
	undo   *undo
}

// chunk is one service built alone: a one-service tree whose indices start
// at 0, so placing it in a bigger tree adds its bases to them.
type chunk struct {
	tree     *Tree
	labels   map[uint64]string // distinct labels of its nodes
	regions  []string          // distinct regions of its endpoints, sorted (for warnings)
	failover []FailoverSpec    // its failover rules (for warnings)
	warnings []Warning         // its warnings that need no other service
}

func (c *chunk) svc() *Service { return &c.tree.services[0] }

type labelUse struct {
	value string
	refs  int
}

// undo is what Revert needs to restore the state before the last Update.
type undo struct {
	old  map[string]*chunk // replaced or removed chunks; nil for added services
	tree *Tree
}

// Tree is the last tree built, nil before the first Update.
func (b *Builder) Tree() *Tree { return b.tree }

// Update replaces or adds the services in upserts, removes the services
// named in removes, and returns the next tree with the given generation.
// Services not named keep their records. On an error (wrapping
// ErrInvalidTopology, ErrLabelCollision or ErrTooLarge, as Build's) nothing
// changes.
func (b *Builder) Update(upserts []ServiceSpec, removes []string, generation uint64) (*Tree, error) {
	return b.UpdateEach(func(yield func(*ServiceSpec) error) error {
		for i := range upserts {
			if err := yield(&upserts[i]); err != nil {
				return err
			}
		}
		return nil
	}, removes, generation)
}

// UpdateEach is Update with the services to add or replace produced by
// each, one at a time: each service is built as it comes and its spec may
// be dropped at once, so a first load of a big topology never holds the
// whole model. An error returned by each is UpdateEach's, and nothing
// changes.
func (b *Builder) UpdateEach(each func(yield func(*ServiceSpec) error) error, removes []string, generation uint64) (*Tree, error) {
	b.init()
	fresh, err := buildChunks(each)
	if err != nil {
		return nil, err
	}
	for _, name := range removes {
		if _, ok := b.chunks[name]; !ok || fresh[name] != nil {
			return nil, invalid("remove %q: no such service, or also updated", name)
		}
		fresh[name] = nil
	}
	old, err := b.swap(fresh)
	if err != nil {
		return nil, err
	}
	tree, err := b.check(generation)
	if err != nil {
		b.swapBack(fresh, old)
		return nil, err
	}
	b.undo = &undo{old: old, tree: b.tree}
	b.tree = tree
	return tree, nil
}

// Check reports the error Update would return for adding or replacing
// spec alone, without changing b: the service's own errors (as Build's),
// and a name, host, VIP or label value another service holds. It builds the
// one service, not the tree.
func (b *Builder) Check(spec *ServiceSpec) error {
	b.init()
	c, err := buildChunk(spec)
	if err != nil {
		return err
	}
	next := map[string]*chunk{spec.Name: c}
	old, err := b.swap(next)
	if err != nil {
		return err
	}
	b.swapBack(next, old)
	return nil
}

// Stamp returns the last tree built again with another generation (a new
// blob: trees are immutable). It is an error before the first Update.
func (b *Builder) Stamp(generation uint64) (*Tree, error) {
	if b.tree == nil {
		return nil, invalid("no tree built yet")
	}
	t, err := b.assemble(generation)
	if err != nil {
		return nil, err
	}
	b.tree = t
	return t, nil
}

// Commit forgets what Revert would need: the last Update's tree is
// installed, and the services it replaced (and the tree before it) can be
// collected.
func (b *Builder) Commit() { b.undo = nil }

// Revert undoes the last successful Update (a caller that could not
// install its tree); it does nothing when there is nothing to undo.
func (b *Builder) Revert() {
	if b.undo == nil {
		return
	}
	cur := make(map[string]*chunk, len(b.undo.old))
	for name := range b.undo.old {
		cur[name] = b.chunks[name]
	}
	b.swapBack(cur, b.undo.old)
	b.tree, b.undo = b.undo.tree, nil
}

func (b *Builder) init() {
	if b.chunks == nil {
		b.chunks, b.names = map[string]*chunk{}, map[string]string{}
		b.vips, b.labels = map[netip.AddrPort]string{}, map[uint64]labelUse{}
	}
}

// check assembles the tree once the limits allow it.
func (b *Builder) check(generation uint64) (*Tree, error) {
	switch {
	case len(b.order) > MaxServices:
		return nil, fmt.Errorf("%w: %d services (limit %d)", ErrTooLarge, len(b.order), MaxServices)
	case b.eps > MaxEndpoints || b.nodes > MaxNodes:
		return nil, fmt.Errorf("%w: %d endpoints and %d nodes (limits %d and %d)", ErrTooLarge, b.eps, b.nodes, MaxEndpoints, MaxNodes)
	}
	return b.assemble(generation)
}

// buildChunks builds each service alone, validated as Build validates it.
func buildChunks(each func(yield func(*ServiceSpec) error) error) (map[string]*chunk, error) {
	out := map[string]*chunk{}
	err := each(func(spec *ServiceSpec) error {
		c, err := buildChunk(spec)
		if err != nil {
			return err
		}
		if _, dup := out[spec.Name]; dup {
			return invalid("service %q: name or host %q is already used by service %q", spec.Name, spec.Name, spec.Name)
		}
		out[spec.Name] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func buildChunk(spec *ServiceSpec) (*chunk, error) {
	labels := map[uint64]string{}
	s, err := prepareService(spec, labels)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range append([]string{s.name}, s.hosts...) {
		if seen[n] {
			return nil, invalid("service %q: name or host %q is already used by service %q", s.name, n, s.name)
		}
		seen[n] = true
	}
	blob, err := encode([]*builtService{s}, 0)
	if err != nil {
		return nil, err
	}
	t, err := Decode(blob)
	if err != nil {
		return nil, fmt.Errorf("service %q: %w", spec.Name, err)
	}
	return &chunk{tree: t, labels: labels, regions: endpointRegions(spec.Endpoints), failover: slices.Clone(s.failover), warnings: s.localityWarnings()}, nil
}

// swap detaches the current chunks of the names in next and attaches next's
// (nil: removed). It returns the detached chunks, or restores everything
// and returns the error of a name, host, VIP or label already taken.
func (b *Builder) swap(next map[string]*chunk) (map[string]*chunk, error) {
	old := make(map[string]*chunk, len(next))
	for name := range next {
		old[name] = b.chunks[name]
		if old[name] != nil {
			b.detach(old[name])
		}
	}
	var done []*chunk
	for _, name := range slices.Sorted(mapKeys(next)) {
		c := next[name]
		if c == nil {
			continue
		}
		if err := b.attach(c); err != nil {
			for _, d := range done {
				b.detach(d)
			}
			b.reattach(old)
			return nil, err
		}
		done = append(done, c)
	}
	return old, nil
}

// swapBack detaches cur's chunks and re-attaches old's, which fitted before.
func (b *Builder) swapBack(cur, old map[string]*chunk) {
	for _, c := range cur {
		if c != nil {
			b.detach(c)
		}
	}
	b.reattach(old)
}

func (b *Builder) reattach(old map[string]*chunk) {
	for _, c := range old {
		if c != nil {
			if err := b.attach(c); err != nil {
				panic("shared: builder cannot restore its state: " + err.Error())
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// attach adds a chunk's names, VIP and labels, or fails leaving b as it was.
func (b *Builder) attach(c *chunk) error {
	s := c.svc()
	names := append([]string{s.name}, s.hosts...)
	for _, n := range names {
		if prev, ok := b.names[n]; ok {
			return invalid("service %q: name or host %q is already used by service %q", s.name, n, prev)
		}
	}
	if prev, ok := b.vips[s.vip]; ok && s.vip.IsValid() {
		return invalid("services %q and %q have the same vip %s; give each service its own vip:port", prev, s.name, s.vip)
	}
	for label, value := range c.labels {
		if prev, ok := b.labels[label]; ok && prev.value != value {
			return fmt.Errorf("%w: service %q: values %q and %q share label %#x; rename one", ErrLabelCollision, s.name, prev.value, value, label)
		}
	}
	for _, n := range names {
		b.names[n] = s.name
	}
	if s.vip.IsValid() {
		b.vips[s.vip] = s.name
	}
	for label, value := range c.labels {
		u := b.labels[label]
		b.labels[label] = labelUse{value: value, refs: u.refs + 1}
	}
	b.chunks[s.name] = c
	i, _ := slices.BinarySearch(b.order, s.name)
	b.order = slices.Insert(b.order, i, s.name)
	b.count(c, 1)
	return nil
}

// detach removes what attach added.
func (b *Builder) detach(c *chunk) {
	s := c.svc()
	for _, n := range append([]string{s.name}, s.hosts...) {
		delete(b.names, n)
	}
	if s.vip.IsValid() {
		delete(b.vips, s.vip)
	}
	for label := range c.labels {
		if u := b.labels[label]; u.refs > 1 {
			b.labels[label] = labelUse{value: u.value, refs: u.refs - 1}
		} else {
			delete(b.labels, label)
		}
	}
	delete(b.chunks, s.name)
	if i, ok := slices.BinarySearch(b.order, s.name); ok {
		b.order = slices.Delete(b.order, i, i+1)
	}
	b.count(c, -1)
}

func (b *Builder) count(c *chunk, sign int) {
	b.nodes += sign * c.tree.NumNodes()
	b.eps += sign * c.tree.NumEndpoints()
	b.aux += sign * len(c.tree.aux) / wire.NodeRecordSize
	b.meta += sign * len(c.meta())
}

// meta is the chunk's strings section: the service's metadata.
func (c *chunk) meta() []byte { return c.tree.blob[le.Uint32(c.tree.blob[wire.HStringsOff:]):] }

// assemble lays every chunk out in name order (docs/FORMAT.md): copies of
// their records with the indices shifted, then the checksum. The Tree's
// services are copies of the chunks' decoded services, placed.
func (b *Builder) assemble(generation uint64) (*Tree, error) {
	c := sections{svcs: len(b.order), nodes: b.nodes, eps: b.eps, aux: b.aux, strs: b.meta}
	nodesOff, epsOff, polsOff, auxOff, strOff, total := c.offsets()
	if total > MaxBlobSize {
		return nil, fmt.Errorf("%w: encoded tree of %d bytes (limit %d)", ErrTooLarge, total, MaxBlobSize)
	}
	blob := make([]byte, total)
	putHeader(blob, generation, c)
	t := &Tree{blob: blob, services: make([]Service, len(b.order)), byName: make(map[string]int, len(b.names)),
		nodes: blob[nodesOff:epsOff], eps: blob[epsOff:polsOff], pols: blob[polsOff:auxOff], aux: blob[auxOff:strOff]}
	var nodeBase, epBase, auxBase, metaOff int
	for i, name := range b.order {
		c := b.chunks[name]
		rec := blob[wire.HeaderSize+i*wire.ServiceRecordSize:][:wire.ServiceRecordSize]
		copy(rec, c.tree.serviceRecord(0))
		le.PutUint32(rec[wire.SRoot:], uint32(nodeBase))
		le.PutUint32(rec[wire.SEpFirst:], uint32(epBase))
		le.PutUint32(rec[wire.SMetaOff:], uint32(metaOff))
		placeNodes(t.nodes[nodeBase*wire.NodeRecordSize:], c.tree.nodes, uint32(nodeBase), uint32(epBase))
		copy(t.eps[epBase*wire.EndpointRecordSize:], c.tree.eps)
		placePolicy(t.pols[i*wire.PolicyRecordSize:][:wire.PolicyRecordSize], c.tree.pols, uint32(auxBase))
		placeNodes(t.aux[auxBase*wire.NodeRecordSize:], c.tree.aux, uint32(auxBase), uint32(epBase))
		metaOff += copy(blob[strOff+metaOff:], c.meta())
		s := &t.services[i]
		*s = *c.svc()
		s.index, s.lay.Root, s.lay.EpFirst, s.tree = i, uint32(nodeBase), uint32(epBase), t
		s.lay.AuxRoot[0] += uint32(auxBase)
		s.lay.AuxRoot[1] += uint32(auxBase)
		s.lay.NetRoot += uint32(auxBase)
		s.precomputeDistribute() // its ranges are absolute
		s.precomputeLocalities()
		for _, n := range append([]string{s.name}, s.hosts...) {
			t.byName[n] = i
		}
		nodeBase += int(s.lay.NodeCount)
		epBase += c.tree.NumEndpoints()
		auxBase += len(c.tree.aux) / wire.NodeRecordSize
	}
	le.PutUint32(blob[wire.HChecksum:], checksum(blob))
	return t, nil
}

// placePolicy copies a one-service tree's policy record to dst, adding the
// aux base to the roots of its degraded and unhealthy trees.
func placePolicy(dst, src []byte, auxBase uint32) {
	copy(dst, src)
	le.PutUint32(dst[wire.PDegradedRoot:], le.Uint32(dst[wire.PDegradedRoot:])+auxBase)
	le.PutUint32(dst[wire.PUnhealthyRoot:], le.Uint32(dst[wire.PUnhealthyRoot:])+auxBase)
}

// placeNodes copies node records built at base 0 to dst, adding the bases
// to their endpoint range and first child.
func placeNodes(dst, src []byte, nodeBase, epBase uint32) {
	copy(dst, src)
	for off := 0; off < len(src); off += wire.NodeRecordSize {
		n := dst[off : off+wire.NodeRecordSize]
		le.PutUint32(n[wire.NLo:], le.Uint32(n[wire.NLo:])+epBase)
		le.PutUint32(n[wire.NHi:], le.Uint32(n[wire.NHi:])+epBase)
		if le.Uint32(n[wire.NChildCount:]) > 0 {
			le.PutUint32(n[wire.NFirstChild:], le.Uint32(n[wire.NFirstChild:])+nodeBase)
		}
	}
}
