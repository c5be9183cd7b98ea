package kubernetes

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// state is what the source has published, owned by Run's goroutine.
type state struct {
	specs      map[string][]shared.ServiceSpec // Service key → its tree services
	good       map[string]svcSettings          // Service key → last good settings
	reported   map[string]string               // Service key → last bad annotation reported
	nodeSvcs   map[string]map[string]struct{}  // node name → Service keys with endpoints on it
	svcNodes   map[string]map[string]struct{}  // Service key → node names
	localities map[string]shared.Locality      // node name → locality
	nodeList   []shared.NodeSpec
	published  bool
	// rejected are the services of updates the agent rejected since the
	// last it applied: named again in the next update.
	rejected map[string]struct{}
}

func newState() *state {
	return &state{
		specs: map[string][]shared.ServiceSpec{}, good: map[string]svcSettings{},
		reported: map[string]string{}, nodeSvcs: map[string]map[string]struct{}{},
		svcNodes: map[string]map[string]struct{}{}, localities: map[string]shared.Locality{},
	}
}

// sync applies the dirty set and returns the update, false if nothing changed.
func (s *Source) sync() (Update, bool) {
	d := s.takeDirty()
	st := s.state
	if d.all {
		d = s.everything(d)
	}
	s.expandNamespaces(d)
	moved := s.syncNodes(d.nodes)
	for n := range moved {
		for key := range st.nodeSvcs[n] {
			d.services[key] = struct{}{}
		}
	}
	changed := map[string]struct{}{}
	for key := range d.services {
		s.syncService(key, changed)
	}
	_, ownMoved := moved[s.cfg.NodeName]
	if st.published && len(changed) == 0 && len(moved) == 0 {
		return Update{}, false
	}
	for name := range st.rejected {
		changed[name] = struct{}{}
	}
	st.published = true
	if len(moved) > 0 {
		st.nodeList = nodeSpecs(st.localities)
	}
	top := &shared.Topology{Services: st.allServices(), Nodes: st.nodeList}
	return Update{
		Topology:        top,
		Services:        source.TopologyServices(top),
		Nodes:           top.Nodes,
		Locality:        st.localities[s.cfg.NodeName],
		Changed:         slices.Sorted(maps.Keys(changed)),
		LocalityChanged: ownMoved,
		Observed:        d.since,
	}, true
}

// applied records whether the agent applied the update just published; the
// services of a rejected one are named again in the next.
func (st *state) applied(u Update, err error) {
	if err == nil {
		st.rejected = nil
		return
	}
	if st.rejected == nil {
		st.rejected = map[string]struct{}{}
	}
	for _, name := range u.Changed {
		st.rejected[name] = struct{}{}
	}
}

// everything marks every known and every listed Service and Node dirty.
func (s *Source) everything(d dirtySet) dirtySet {
	d.services, d.nodes = map[string]struct{}{}, map[string]struct{}{}
	for key := range s.state.specs {
		d.services[key] = struct{}{}
	}
	svcs, _ := s.services.List(labels.Everything())
	for _, svc := range svcs {
		d.services[svc.Namespace+"/"+svc.Name] = struct{}{}
	}
	for name := range s.state.localities {
		d.nodes[name] = struct{}{}
	}
	nodes, _ := s.nodes.List(labels.Everything())
	for _, n := range nodes {
		d.nodes[n.Name] = struct{}{}
	}
	return d
}

// expandNamespaces marks every Service of the dirty namespaces, known or listed.
func (s *Source) expandNamespaces(d dirtySet) {
	for ns := range d.namespaces {
		svcs, _ := s.services.Services(ns).List(labels.Everything())
		for _, svc := range svcs {
			d.services[svc.Namespace+"/"+svc.Name] = struct{}{}
		}
		for key := range s.state.specs {
			if strings.HasPrefix(key, ns+"/") {
				d.services[key] = struct{}{}
			}
		}
	}
}

// syncNodes refreshes node localities and returns the nodes whose locality
// changed (added and removed nodes included).
func (s *Source) syncNodes(names map[string]struct{}) map[string]struct{} {
	moved := map[string]struct{}{}
	for name := range names {
		n, err := s.nodes.Get(name)
		old, had := s.state.localities[name]
		switch {
		case err != nil:
			if had {
				delete(s.state.localities, name)
				moved[name] = struct{}{}
			}
		default:
			if loc := NodeLocality(n, s.cfg.ClusterID); !had || !maps.Equal(old, loc) {
				s.state.localities[name] = loc
				moved[name] = struct{}{}
			}
		}
	}
	return moved
}

func nodeSpecs(locs map[string]shared.Locality) []shared.NodeSpec {
	out := make([]shared.NodeSpec, 0, len(locs))
	for _, name := range slices.Sorted(maps.Keys(locs)) {
		out = append(out, shared.NodeSpec{Name: name, Locality: locs[name]})
	}
	return out
}

// syncService recomputes one Service's tree services and adds the names of
// those that changed to changed.
func (s *Source) syncService(key string, changed map[string]struct{}) {
	st := s.state
	nodes := map[string]struct{}{}
	specs := s.serviceSpecs(key, nodes)
	diffSpecs(st.specs[key], specs, changed)
	if len(specs) == 0 {
		delete(st.specs, key)
	} else {
		st.specs[key] = specs
	}
	st.setNodes(key, nodes)
}

// serviceSpecs are the tree services of the Service key now, nil if it is
// gone or not managed.
func (s *Source) serviceSpecs(key string, nodes map[string]struct{}) []shared.ServiceSpec {
	st := s.state
	ns, name, _ := strings.Cut(key, "/")
	svc, err := s.services.Services(ns).Get(name)
	if err != nil { // not found: the Service is gone
		delete(st.good, key)
		delete(st.reported, key)
		return nil
	}
	set, managed, err := serviceSettings(svc, s.policyInput(svc))
	switch {
	case err != nil:
		s.reportBad(svc, err)
		set, managed = st.good[key]
	case managed:
		st.good[key] = set
		delete(st.reported, key)
	default:
		delete(st.good, key)
		delete(st.reported, key)
	}
	if !managed {
		return nil
	}
	objs, _ := s.slices.ByIndex(serviceIndex, key)
	same, _ := s.byName.ByIndex(nameIndex, name)
	return treeServices(&treeInput{
		svc: svc, settings: set, slices: asSlices(objs), labels: s.nodeLabels,
		clusterID: s.cfg.ClusterID, domain: s.cfg.Domain, nameShared: len(same) > 1,
	}, nodes)
}

// policyInput gathers the Namespace annotations and DestinationRules of svc.
func (s *Source) policyInput(svc *corev1.Service) policyInput {
	in := policyInput{mesh: s.cfg.Mesh.LocalityLB}
	if ns, err := s.nsLister.Get(svc.Namespace); err == nil {
		in.nsAnnotations = ns.Annotations
	}
	root := s.cfg.Mesh.RootNamespace
	in.rules = selectRule(s.rules.in(svc.Namespace, root), svc.Namespace, svc.Name, s.cfg.Domain, root)
	return in
}

func (s *Source) nodeLabels(name string) map[string]string {
	n, err := s.nodes.Get(name)
	if err != nil {
		return nil
	}
	return n.Labels
}

// diffSpecs adds to changed the names in old or new whose spec differs.
func diffSpecs(old, cur []shared.ServiceSpec, changed map[string]struct{}) {
	prev := make(map[string]*shared.ServiceSpec, len(old))
	for i := range old {
		prev[old[i].Name] = &old[i]
	}
	for i := range cur {
		p, ok := prev[cur[i].Name]
		if !ok || !reflect.DeepEqual(*p, cur[i]) {
			changed[cur[i].Name] = struct{}{}
		}
		delete(prev, cur[i].Name)
	}
	for name := range prev {
		changed[name] = struct{}{}
	}
}

// setNodes records which nodes a Service's endpoints are on.
func (st *state) setNodes(key string, nodes map[string]struct{}) {
	for n := range st.svcNodes[key] {
		if _, still := nodes[n]; !still {
			delete(st.nodeSvcs[n], key)
			if len(st.nodeSvcs[n]) == 0 {
				delete(st.nodeSvcs, n)
			}
		}
	}
	for n := range nodes {
		if st.nodeSvcs[n] == nil {
			st.nodeSvcs[n] = map[string]struct{}{}
		}
		st.nodeSvcs[n][key] = struct{}{}
	}
	if len(nodes) == 0 {
		delete(st.svcNodes, key)
	} else {
		st.svcNodes[key] = nodes
	}
}

func (st *state) allServices() []shared.ServiceSpec {
	var out []shared.ServiceSpec
	for _, specs := range st.specs {
		out = append(out, specs...)
	}
	slices.SortFunc(out, func(a, b shared.ServiceSpec) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
