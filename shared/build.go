package shared

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// BuildOptions are the caller's settings for Build.
type BuildOptions struct {
	// Generation is written into the header; callers increase it on every change.
	Generation uint64
	// Warn, when set, is called with each Warning of a topology Build
	// accepts (services in name order, then rules in order), before Build
	// returns; a topology it refuses has no warnings.
	Warn func(Warning)
}

// Build validates a topology and encodes it into a tree. The same topology and
// options always give the same bytes. Errors wrap ErrInvalidTopology,
// ErrLabelCollision or ErrTooLarge and name the service and endpoint at fault.
func Build(top *Topology, opts BuildOptions) (*Tree, error) {
	svcs, err := prepareServices(top)
	if err != nil {
		return nil, err
	}
	blob, err := encode(svcs, opts.Generation)
	if err != nil {
		return nil, err
	}
	t, err := Decode(blob)
	if err == nil && opts.Warn != nil {
		for _, w := range buildWarnings(top, svcs) {
			opts.Warn(w)
		}
	}
	return t, err
}

// builtService is a validated service, its endpoints sorted, its nodes laid out.
type builtService struct {
	name       string
	hosts      []string
	scopes     []string
	mode       Mode
	policy     Policy
	health     Health
	vip        netip.AddrPort
	eps        []builtEndpoint   // in spec order
	labels     []uint64          // labels[i*len(scopes)+d]: endpoint i's label at depth d
	order      []int32           // eps indices, sorted: eligible first, each part by labels and address
	netOrder   []int32           // with the network rule: the eligible eps indices sorted by the scopes after network (with spillover: sortOther's copies)
	netLabel   []uint64          // with the network rule and spillover: each copy's network m (sortOther)
	netSet     []uint8           // and its set
	netChain   []uint8           // and how many levels its key takes (groups.go otherGroup.chain)
	classKeys  map[uint64]string // the class keys among netLabel (groups.go), and their classes
	nElig      int
	nDeg       int            // degraded endpoints; they follow the eligible ones
	nodes      []builtNode    // breadth-first, root first; indices relative to the service
	aux        [3][]builtNode // the trees over the degraded and the unhealthy endpoints, and the network tree
	netRule    bool           // the network rule is in force (docs/FORMAT.md, "Network rule")
	other      uint8          // a spillover service's copies by its first scope: 0 none, else its network_rule byte (otherRanked, otherMerged; network.go)
	classes    bool           // the copies hold groups by class before the locality (groups.go)
	groups     []otherGroup   // the groups of the copies, in priority order
	first      int            // the index of the first locality scope
	spill      bool           // priority load (Spillover) is on
	of         uint32         // overprovisioning factor, percent
	panic      uint32         // panic threshold, percent
	failover   []FailoverSpec
	distribute []builtRule
	affinity   uint32 // session affinity timeout, seconds; 0: none set
	minRank    int    // bounded failover: candidates share at least this many scopes
	loadHigh   uint32 // load-aware widening's band (load_aware.go); 0: off
	loadLow    uint32
}

type builtEndpoint struct {
	addr     netip.AddrPort
	hi, lo   uint64 // the address as 16 big-endian bytes, for sorting
	weight   uint32
	healthy  bool
	degraded bool
	elig     bool
}

// class orders endpoints into the three sets of the format: eligible,
// degraded (only_healthy services), unhealthy.
func (e *builtEndpoint) class() uint64 {
	switch {
	case e.elig:
		return 0
	case e.degraded:
		return 1
	}
	return 2
}

type builtNode struct {
	label      uint64
	value      string
	lo, hi     uint32 // relative to the service's first endpoint
	firstChild uint32 // relative to the service's root
	childCount uint32
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidTopology, fmt.Sprintf(format, args...))
}

func prepareServices(top *Topology) ([]*builtService, error) {
	if top == nil {
		return nil, invalid("no topology")
	}
	if len(top.Services) > MaxServices {
		return nil, fmt.Errorf("%w: %d services (limit %d)", ErrTooLarge, len(top.Services), MaxServices)
	}
	svcs := make([]*builtService, 0, len(top.Services))
	names := map[string]string{}
	labels := map[uint64]string{}
	vips := vipOwners{}
	var nEps, nNodes int
	for i := range top.Services {
		s, err := prepareService(&top.Services[i], labels)
		if err != nil {
			return nil, err
		}
		if err := vips.claim(s); err != nil {
			return nil, err
		}
		for _, n := range append([]string{s.name}, s.hosts...) {
			if prev, ok := names[n]; ok {
				return nil, invalid("service %q: name or host %q is already used by service %q", s.name, n, prev)
			}
			names[n] = s.name
		}
		nEps += len(s.eps)
		nEps += len(s.netOrder)
		nNodes += len(s.nodes) + len(s.aux[0]) + len(s.aux[1]) + len(s.aux[2])
		svcs = append(svcs, s)
	}
	if nEps > MaxEndpoints || nNodes > MaxNodes {
		return nil, fmt.Errorf("%w: %d endpoints and %d nodes (limits %d and %d)", ErrTooLarge, nEps, nNodes, MaxEndpoints, MaxNodes)
	}
	slices.SortFunc(svcs, func(a, b *builtService) int { return cmp.Compare(a.name, b.name) })
	return svcs, nil
}

func prepareService(spec *ServiceSpec, labels map[uint64]string) (*builtService, error) {
	s, err := prepareHeader(spec)
	if err != nil {
		return nil, err
	}
	if err := s.prepareEndpoints(spec.Endpoints); err != nil {
		return nil, err
	}
	if err := s.layoutNodes(spec.Endpoints, labels); err != nil {
		return nil, err
	}
	return s, nil
}

func prepareHeader(spec *ServiceSpec) (*builtService, error) {
	if spec.Name == "" {
		return nil, invalid("service without a name")
	}
	s := &builtService{name: spec.Name, hosts: spec.Hosts, scopes: spec.Scopes}
	if err := checkStrings(spec); err != nil {
		return nil, err
	}
	if err := s.localityOff(spec); err != nil {
		return nil, err
	}
	if len(s.scopes) == 0 {
		s.scopes = DefaultScopes()
	}
	var err error
	if s.mode, err = ParseMode(spec.Mode); err != nil {
		return nil, invalid("service %q: %v", spec.Name, err)
	}
	if s.policy, err = ParsePolicy(spec.Policy); err != nil {
		return nil, invalid("service %q: %v", spec.Name, err)
	}
	if s.health, err = ParseHealth(spec.Health); err != nil {
		return nil, invalid("service %q: %v", spec.Name, err)
	}
	if s.vip, err = parseVIP(spec); err != nil {
		return nil, err
	}
	if err := s.parseSpillover(spec.Spillover); err != nil {
		return nil, err
	}
	if err := s.parseAffinity(spec.SessionAffinity); err != nil {
		return nil, err
	}
	if err := s.parseFailover(spec.Failover); err != nil {
		return nil, err
	}
	if err := s.parseDistribute(spec.Distribute, len(spec.Failover)); err != nil {
		return nil, err
	}
	if err := s.parseFailoverLimit(spec); err != nil {
		return nil, err
	}
	if err := s.parseNetworkRule(spec); err != nil {
		return nil, err
	}
	return s, s.parseLoadAware(spec)
}

// parseFailoverLimit validates failover_limit: one of the scopes, in mode
// failover, with locality load balancing.
func (s *builtService) parseFailoverLimit(spec *ServiceSpec) error {
	if spec.FailoverLimit == "" {
		return nil
	}
	i := slices.Index(s.scopes, spec.FailoverLimit)
	switch {
	case spec.LocalityLB != nil && !*spec.LocalityLB:
		return invalid("service %q: failover_limit needs locality load balancing; remove failover_limit or locality_lb: false", s.name)
	case i < 0:
		return invalid("service %q: failover_limit %q is not one of the scopes %v; name the widest scope candidates must share with the source", s.name, spec.FailoverLimit, s.scopes)
	case len(spec.Distribute) > 0:
		return invalid("service %q: failover_limit and distribute exclude each other (a distribute rule names where traffic goes); remove one of them", s.name)
	case s.mode == ModeStrict:
		return invalid("service %q: failover_limit has no effect in mode strict (candidates match every scope); remove one of them", s.name)
	}
	s.minRank = i + 1
	return nil
}

// scopeValue is an endpoint's value for a scope as the tree stores it: its
// locality's value; "" for NoLocalityScope; for Istio's failoverPriority
// override "k=v", "" when the endpoint's k is v and "not v" otherwise. A
// source never has a key "k=v" (nor the reserved key), so its value is ""
// and it matches exactly the endpoints Istio's override matches, in every
// data plane, with no reader change.
func scopeValue(scope string, loc Locality) string {
	if scope == NoLocalityScope {
		return ""
	}
	name, want, ok := strings.Cut(scope, "=")
	if !ok {
		return loc[scope]
	}
	if loc[name] == want {
		return ""
	}
	return "not " + want
}

// localityOff applies locality_lb: false: the single reserved scope.
func (s *builtService) localityOff(spec *ServiceSpec) error {
	if slices.Contains(spec.Scopes, NoLocalityScope) {
		return invalid("service %q: scope %q is reserved for locality_lb: false", s.name, NoLocalityScope)
	}
	if spec.LocalityLB == nil || *spec.LocalityLB {
		return nil
	}
	switch {
	case len(spec.Scopes) > 0:
		return invalid("service %q: scopes have no effect with locality_lb: false; remove them or locality_lb", s.name)
	case len(spec.Failover) > 0:
		return invalid("service %q: failover needs locality load balancing; remove failover or locality_lb: false", s.name)
	case len(spec.Distribute) > 0:
		return invalid("service %q: distribute needs locality load balancing; remove distribute or locality_lb: false", s.name)
	}
	s.scopes = []string{NoLocalityScope}
	return nil
}

// parseFailover validates Istio's failover rules.
func (s *builtService) parseFailover(rules []FailoverSpec) error {
	if len(rules) == 0 {
		return nil
	}
	switch {
	case len(rules) > MaxFailover:
		return invalid("service %q: %d failover rules (limit %d)", s.name, len(rules), MaxFailover)
	case !s.spill:
		return invalid("service %q: failover needs spillover: failover rules order the priorities of the priority load (add spillover: {}), which the plain lookup does not have", s.name)
	case !slices.Contains(s.scopes, "region"):
		return invalid("service %q: failover names regions, but the scopes %v have no \"region\"", s.name, s.scopes)
	}
	seen := map[string]bool{}
	for _, r := range rules {
		for _, v := range []string{r.From, r.To} {
			if v == "" || len(v) > MaxString {
				return invalid("service %q: failover from %q to %q: regions must be non-empty and at most %d bytes", s.name, r.From, r.To, MaxString)
			}
			if err := checkText(v); err != nil {
				return invalid("service %q: failover region %v", s.name, err)
			}
		}
		if err := CheckFailoverRule(r); err != nil {
			return invalid("service %q: failover from %q to %q: %v", s.name, r.From, r.To, err)
		}
		if seen[r.From] {
			return invalid("service %q: failover from %q to %q: an earlier rule has from %q; a region fails over to one region (keep one rule)", s.name, r.From, r.To, r.From)
		}
		seen[r.From] = true
	}
	s.failover = rules
	return nil
}

// parseSpillover validates the priority-load settings and fills defaults.
func (s *builtService) parseSpillover(sp *SpilloverSpec) error {
	if sp == nil {
		return nil
	}
	if s.mode != ModeFailover {
		return invalid("service %q: spillover needs mode failover (mode is %s); remove spillover or the mode", s.name, s.mode)
	}
	s.spill, s.of, s.panic = true, DefaultOverprovisioningFactor, DefaultPanicThreshold
	if sp.OverprovisioningFactor != nil {
		s.of = *sp.OverprovisioningFactor
	}
	if sp.PanicThreshold != nil {
		s.panic = *sp.PanicThreshold
	}
	if s.of < 1 || s.of > MaxOverprovisioningFactor {
		return invalid("service %q: spillover overprovisioning_factor %d (want a percent from 1 to %d: 140 means a factor of 1.4, Envoy's default)", s.name, s.of, MaxOverprovisioningFactor)
	}
	if s.panic > 100 {
		return invalid("service %q: spillover panic_threshold %d (want a percent from 0 to 100; 0 disables panic)", s.name, s.panic)
	}
	return nil
}

// parseAffinity validates the session affinity as Kubernetes'
// validateAffinityTimeout does and fills its default timeout.
func (s *builtService) parseAffinity(sa *SessionAffinitySpec) error {
	if sa == nil {
		return nil
	}
	if s.policy != PolicyConsistentHash {
		return invalid("service %q: session_affinity needs policy consistent_hash (policy is %s); set the policy or remove session_affinity", s.name, s.policy)
	}
	s.affinity = DefaultAffinityTimeout
	if sa.TimeoutSeconds != nil {
		s.affinity = *sa.TimeoutSeconds
	}
	if s.affinity < 1 || s.affinity > MaxAffinityTimeout {
		return invalid("service %q: session_affinity timeout_seconds %d (want 1 to %d, as Kubernetes; the default is %d)", s.name, s.affinity, MaxAffinityTimeout, DefaultAffinityTimeout)
	}
	return nil
}

// parseVIP parses the optional VIP; none is the zero AddrPort.
func parseVIP(spec *ServiceSpec) (netip.AddrPort, error) {
	if spec.VIP == "" {
		return netip.AddrPort{}, nil
	}
	vip, err := parseAddr(spec.VIP)
	if err != nil {
		return vip, invalid("service %q: vip: %v", spec.Name, err)
	}
	if err := checkUnicast(vip.Addr()); err != nil {
		return vip, invalid("service %q: vip %s: %v", spec.Name, vip, err)
	}
	return vip, nil
}

func checkStrings(spec *ServiceSpec) error {
	if len(spec.Name) > MaxString {
		return invalid("service name of %d bytes (limit %d)", len(spec.Name), MaxString)
	}
	if err := checkText(spec.Name); err != nil {
		return invalid("service name %v", err)
	}
	if len(spec.Hosts) > MaxHosts {
		return invalid("service %q: %d hosts (limit %d)", spec.Name, len(spec.Hosts), MaxHosts)
	}
	for _, h := range spec.Hosts {
		if h == "" || len(h) > MaxString {
			return invalid("service %q: host %q is empty or longer than %d bytes", spec.Name, h, MaxString)
		}
		if err := checkText(h); err != nil {
			return invalid("service %q: host %v", spec.Name, err)
		}
	}
	if len(spec.Scopes) > MaxLevels {
		return invalid("service %q: %d scopes (want 1 to %d)", spec.Name, len(spec.Scopes), MaxLevels)
	}
	seen := map[string]bool{}
	for _, sc := range spec.Scopes {
		if sc == "" || len(sc) > MaxString || seen[sc] {
			return invalid("service %q: scope %q is empty, too long or repeated", spec.Name, sc)
		}
		if err := checkText(sc); err != nil {
			return invalid("service %q: scope %v", spec.Name, err)
		}
		if name, v, ok := strings.Cut(sc, "="); ok && (name == "" || strings.Contains(v, "=")) {
			return invalid("service %q: scope %q: an override is label=value with one \"=\" and a label (Istio's failoverPriority form)", spec.Name, sc)
		}
		seen[sc] = true
	}
	return nil
}

func parseAddr(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("bad address %q: want ip:port or [ipv6]:port", s)
	}
	if ap.Addr().Zone() != "" {
		return ap, fmt.Errorf("bad address %q: zones are not supported", s)
	}
	if ap.Port() == 0 {
		return ap, fmt.Errorf("bad address %q: port 0", s)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

func (s *builtService) prepareEndpoints(specs []EndpointSpec) error {
	seen := newAddrSet(len(specs))
	var total uint64
	L := len(s.scopes)
	s.eps = make([]builtEndpoint, len(specs))
	s.labels = make([]uint64, len(specs)*L)
	for i := range specs {
		e := &s.eps[i]
		if err := s.prepareEndpoint(e, &specs[i], s.labels[i*L:(i+1)*L]); err != nil {
			return err
		}
		if !seen.add(s.eps, int32(i)) {
			return invalid("service %q: duplicate endpoint %s", s.name, e.addr)
		}
		total += uint64(e.weight)
		if e.elig = s.eligible(e); e.elig {
			s.nElig++
		} else if e.degraded {
			s.nDeg++
		}
	}
	if len(specs) > 0 && total == 0 {
		return invalid("service %q: every endpoint has weight 0", s.name)
	}
	s.sortEndpoints()
	return s.sortNetwork()
}

// addrSet is a set of endpoint addresses (indices into a service's
// endpoints), an open-addressing table: a map keyed by netip.AddrPort cost a
// quarter of a 100k-endpoint Build.
type addrSet struct {
	slots []int32 // endpoint index + 1; 0: empty
}

func newAddrSet(n int) addrSet {
	size := 1
	for size < 2*n {
		size *= 2
	}
	return addrSet{slots: make([]int32, size)}
}

// add adds eps[i]'s address; false when an earlier endpoint has it.
func (s *addrSet) add(eps []builtEndpoint, i int32) bool {
	e, mask := &eps[i], uint64(len(s.slots)-1)
	h := (e.hi*0x9e3779b97f4a7c15 ^ e.lo ^ uint64(e.addr.Port())<<40) * 0xff51afd7ed558ccd >> 24
	for j := h & mask; ; j = (j + 1) & mask {
		switch k := s.slots[j]; {
		case k == 0:
			s.slots[j] = i + 1
			return true
		case eps[k-1].addr == e.addr:
			return false
		}
	}
}

// sortKey orders endpoints: eligible first, then by the rank of their label
// path, then by address bytes, address length and port. The last 32 bits of
// tail hold the endpoint's index, which makes keys unique.
type sortKey struct{ head, hi, lo, tail uint64 }

func (a sortKey) compare(b sortKey) int {
	if a.head != b.head {
		return cmp.Compare(a.head, b.head)
	}
	if a.hi != b.hi {
		return cmp.Compare(a.hi, b.hi)
	}
	if a.lo != b.lo {
		return cmp.Compare(a.lo, b.lo)
	}
	return cmp.Compare(a.tail, b.tail)
}

// sortEndpoints fills s.order. Endpoints share few distinct label paths, so
// it ranks the paths once and then sorts small fixed-size keys, which is
// several times faster than comparing label slices through a permutation.
func (s *builtService) sortEndpoints() {
	L := len(s.scopes)
	ids := make(map[[MaxLevels]uint64]int32)
	pathOf := make([]int32, len(s.eps))
	var paths [][MaxLevels]uint64
	for i := range s.eps {
		var p [MaxLevels]uint64
		copy(p[:], s.labels[i*L:(i+1)*L])
		id, ok := ids[p]
		if !ok {
			id = int32(len(paths))
			ids[p] = id
			paths = append(paths, p)
		}
		pathOf[i] = id
	}
	byLabels := make([]int32, len(paths))
	for i := range byLabels {
		byLabels[i] = int32(i)
	}
	slices.SortFunc(byLabels, func(a, b int32) int { return slices.Compare(paths[a][:L], paths[b][:L]) })
	rank := make([]uint64, len(paths))
	for r, id := range byLabels {
		rank[id] = uint64(r)
	}
	keys := make([]sortKey, len(s.eps))
	for i := range s.eps {
		e := &s.eps[i]
		k := sortKey{head: e.class()<<62 | rank[pathOf[i]], hi: e.hi, lo: e.lo}
		k.tail = uint64(e.addr.Addr().BitLen())<<48 | uint64(e.addr.Port())<<32 | uint64(i)
		keys[i] = k
	}
	keys = sortKeys(keys, len(paths))
	s.order = make([]int32, len(keys))
	for k, key := range keys {
		s.order[k] = int32(uint32(key.tail))
	}
}

// sortKeys sorts keys whose heads are a class (0..2) and a path rank below
// paths: a counting sort by head, stable, then a sort of each head's keys
// unless they are in order already (endpoints usually arrive by address).
func sortKeys(keys []sortKey, paths int) []sortKey {
	bucket := func(k sortKey) int { return int(k.head>>62)*paths + int(k.head&(1<<62-1)) }
	start := make([]int, 3*paths+1)
	for _, k := range keys {
		start[bucket(k)+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	sorted, next := make([]sortKey, len(keys)), slices.Clone(start[:len(start)-1])
	for _, k := range keys {
		b := bucket(k)
		sorted[next[b]] = k
		next[b]++
	}
	for b := range 3 * paths {
		if run := sorted[start[b]:start[b+1]]; !slices.IsSortedFunc(run, sortKey.compare) {
			slices.SortFunc(run, sortKey.compare)
		}
	}
	return sorted
}

func (s *builtService) prepareEndpoint(e *builtEndpoint, spec *EndpointSpec, labels []uint64) error {
	e.weight, e.healthy = 1, true
	var err error
	if e.addr, err = parseAddr(spec.Address); err != nil {
		return invalid("service %q: endpoint: %v", s.name, err)
	}
	if err := checkUnicast(e.addr.Addr()); err != nil {
		return invalid("service %q: endpoint %s: %v", s.name, e.addr, err)
	}
	a16 := e.addr.Addr().As16()
	e.hi, e.lo = binary.BigEndian.Uint64(a16[:8]), binary.BigEndian.Uint64(a16[8:])
	if spec.Weight != nil {
		e.weight = *spec.Weight
	}
	if spec.Healthy != nil {
		e.healthy = *spec.Healthy
	}
	if spec.Degraded && !e.healthy {
		return invalid("service %q: endpoint %s is both unhealthy and degraded; an endpoint is healthy, degraded or unhealthy", s.name, e.addr)
	}
	e.degraded = spec.Degraded
	for i, sc := range s.scopes {
		v := scopeValue(sc, spec.Locality)
		if len(v) > MaxString {
			return invalid("service %q: endpoint %s: %s value longer than %d bytes", s.name, e.addr, sc, MaxString)
		}
		labels[i] = Label(v)
	}
	return nil
}

// eligible: healthy, or any endpoint under allow_all. A degraded endpoint
// is healthy but not eligible under only_healthy: it is in the degraded set.
func (s *builtService) eligible(e *builtEndpoint) bool {
	return (e.healthy && !e.degraded) || s.health == HealthAllowAll
}

// layoutNodes builds the breadth-first node arrays: the tree over the
// eligible endpoints, and the trees over the degraded and the unhealthy
// ones. labels maps every label to its value, to detect collisions.
func (s *builtService) layoutNodes(specs []EndpointSpec, labels map[uint64]string) error {
	elig, deg := uint32(s.nElig), uint32(s.nElig+s.nDeg)
	var err error
	if s.nodes, err = s.layoutTree(0, elig, specs, labels); err != nil {
		return err
	}
	if s.aux[0], err = s.layoutTree(elig, deg, specs, labels); err != nil {
		return err
	}
	if s.aux[1], err = s.layoutTree(deg, uint32(len(s.eps)), specs, labels); err != nil {
		return err
	}
	switch {
	case s.other != 0:
		s.aux[2], err = s.layoutOther(labels)
	case s.netRule:
		end := uint32(len(s.eps) + len(s.netOrder))
		s.aux[2], err = s.layoutTreeFrom(1, uint32(len(s.eps)), end, specs, labels)
	}
	return err
}

// layoutTree lays out the tree over the sorted endpoints [lo, hi).
func (s *builtService) layoutTree(lo, hi uint32, specs []EndpointSpec, labels map[uint64]string) ([]builtNode, error) {
	return s.layoutTreeFrom(0, lo, hi, specs, labels)
}

// layoutTreeFrom lays out the tree over the sorted endpoints [lo, hi) by
// the scopes from index first on (1: the network tree, without network).
func (s *builtService) layoutTreeFrom(first int, lo, hi uint32, specs []EndpointSpec, labels map[uint64]string) ([]builtNode, error) {
	nodes := []builtNode{{lo: lo, hi: hi}}
	if lo == hi {
		return nodes, nil
	}
	levelStart, levelEnd := 0, 1
	for depth := first; depth < len(s.scopes); depth++ {
		for n := levelStart; n < levelEnd; n++ {
			if err := s.split(&nodes, n, depth, specs, labels); err != nil {
				return nil, err
			}
		}
		levelStart, levelEnd = levelEnd, len(nodes)
	}
	return nodes, nil
}

// split appends the children of node n, one per run of equal labels at depth.
func (s *builtService) split(nodes *[]builtNode, n, depth int, specs []EndpointSpec, labels map[uint64]string) error {
	lo, hi := (*nodes)[n].lo, (*nodes)[n].hi
	first := uint32(len(*nodes))
	for i := lo; i < hi; {
		j := i + 1
		label := s.label(i, depth)
		for j < hi && s.label(j, depth) == label {
			j++
		}
		value := scopeValue(s.scopes[depth], specs[s.at(i)].Locality)
		if err := checkText(value); err != nil {
			return invalid("service %q: %s value %v", s.name, s.scopes[depth], err)
		}
		if prev, ok := labels[label]; ok && prev != value {
			return fmt.Errorf("%w: service %q: values %q and %q share label %#x; rename one", ErrLabelCollision, s.name, prev, value, label)
		}
		labels[label] = value
		*nodes = append(*nodes, builtNode{label: label, value: value, lo: i, hi: j})
		i = j
	}
	(*nodes)[n].firstChild = first
	(*nodes)[n].childCount = uint32(len(*nodes)) - first
	return nil
}

// label is the label at depth of the k-th endpoint in sorted order.
func (s *builtService) label(k uint32, depth int) uint64 {
	return s.labels[int(s.at(k))*len(s.scopes)+depth]
}

// at is the spec index of the k-th endpoint record of the service: the
// sorted endpoints, then the network rule's copies of the eligible ones.
func (s *builtService) at(k uint32) int32 {
	if int(k) < len(s.order) {
		return s.order[k]
	}
	return s.netOrder[int(k)-len(s.order)]
}

// metaSize is the byte length of the service's metadata in the strings section.
func (s *builtService) metaSize() int {
	n := 2 + len(s.name) + 1
	for _, h := range s.hosts {
		n += 2 + len(h)
	}
	for _, sc := range s.scopes {
		n += 2 + len(sc)
	}
	for _, nd := range s.nodes[1:] {
		n += 2 + len(nd.value)
	}
	for _, r := range s.failover {
		n += 4 + len(r.From) + len(r.To)
	}
	return n + s.distributeMetaSize()
}

func (s *builtService) appendMeta(b []byte) []byte {
	b = appendStr(b, s.name)
	b = append(b, byte(len(s.hosts)))
	for _, h := range s.hosts {
		b = appendStr(b, h)
	}
	for _, sc := range s.scopes {
		b = appendStr(b, sc)
	}
	for _, nd := range s.nodes[1:] {
		b = appendStr(b, nd.value)
	}
	for _, r := range s.failover {
		b = appendStr(appendStr(b, r.From), r.To)
	}
	return s.appendDistribute(b)
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
