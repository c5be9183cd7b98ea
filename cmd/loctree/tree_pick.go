package main

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/shared"
)

// exitNoCandidate is the exit status of `tree pick` when no endpoint qualifies.
const exitNoCandidate = 3

type treePickOptions struct {
	file    string
	service string
	from    string
	node    string
	count   int
	seed    uint64
	key     string
	format  string
}

func newTreePickCmd() *cobra.Command {
	var o treePickOptions
	cmd := &cobra.Command{
		Use:   "pick [-f TOPOLOGY|TREE] --service NAME --from scope=value[,scope=value...]",
		Short: "Show where traffic from a source locality goes",
		Long: `Pick looks a source locality up in a service's tree, prints the candidate
endpoints (the eligible endpoints that share the longest prefix of the
service's scopes with the source; in strict mode only full matches), and
picks --count times with the service's policy.

-f reads a topology file (YAML or JSON) or an encoded tree (tree build
--out), whichever it is. --service matches the service name or any of its
hosts. A scope missing from --from is the empty string. --node takes the
source locality from a named node of the topology instead. When the source
matches fewer scopes than the service has, pick says why: a scope --from
left out, a value no eligible endpoint has (with the nearest names), or a
locality whose endpoints are all unhealthy.

Exit status: 0 with candidates, 3 when there is none (strict mode without a
full match, or no eligible endpoint), 1 on bad input.

Examples:
  loctree tree pick --service reviews --from region=us-east,zone=us-east-1a,subzone=rack-1
  loctree tree pick --service reviews --node node-g --count 1000 --seed 7
  loctree tree pick -f mesh.yaml --service payments --from region=eu-central -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTreePick(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "topology file or encoded tree (default: the embedded examples/mesh.yaml)")
	f.StringVar(&o.service, "service", "", "service name or host (required)")
	f.StringVar(&o.from, "from", "", "source locality: scope=value[,scope=value...]")
	f.StringVar(&o.node, "node", "", "use the locality of this node of the topology as the source")
	f.IntVar(&o.count, "count", 1, "number of picks")
	f.Uint64Var(&o.seed, "seed", 0, "random seed for reproducible picks (0: random)")
	f.StringVar(&o.key, "key", "", "request key for consistent_hash (a header value, a client IP, ...)")
	addFormatFlag(cmd, &o.format, "table", "json", "yaml")
	_ = cmd.MarkFlagRequired("service")
	cmd.MarkFlagsMutuallyExclusive("from", "node")
	_ = cmd.RegisterFlagCompletionFunc("service", completeServices)
	_ = cmd.RegisterFlagCompletionFunc("from", completeLocality)
	_ = cmd.RegisterFlagCompletionFunc("node", completeNodes)
	return cmd
}

// pickResult is the -o json shape of pick.
type pickResult struct {
	Service string   `json:"service"`
	Mode    string   `json:"mode"`
	Scopes  []string `json:"scopes"`
	Matched int      `json:"matched"`
	// CrossNetwork: the source's network has no eligible endpoint and
	// ztunnel's network rule ranked the other networks' endpoints; Matched
	// counts the scopes after network.
	CrossNetwork bool            `json:"cross_network,omitempty"`
	Candidates   []string        `json:"candidates"`
	Picks        map[string]int  `json:"picks"`
	Notes        []string        `json:"notes,omitempty"` // why fewer scopes matched
	Loads        []priorityLoad  `json:"loads,omitempty"`
	Distribute   *distributeLoad `json:"distribute,omitempty"`
	Error        string          `json:"error,omitempty"`
}

// priorityLoad is one priority of a spillover service (shared.Loads).
type priorityLoad struct {
	Priority     int    `json:"priority"`
	Matched      int    `json:"matched"`
	Failover     string `json:"failover,omitempty"` // "to": the failover rule's region; "other": the rest
	Healthy      int    `json:"healthy"`
	Degraded     int    `json:"degraded"`
	Total        int    `json:"total"`
	HealthyLoad  int    `json:"healthy_load"`
	DegradedLoad int    `json:"degraded_load"`
	Panic        bool   `json:"panic"`
	// OtherNetworks: the priority's endpoints are on other networks than
	// the source's (the network rule of a spillover service, Istio's
	// failoverPriority network rule); Matched counts the scopes they
	// share with the source.
	OtherNetworks bool `json:"other_networks,omitempty"`
	// OtherValues: the priority's endpoints have other values of this
	// scope than the source's, the first they differ at (named here:
	// "network", "cluster"; with two or more scopes before the locality,
	// any of them), ranked from their copies (docs/FORMAT.md "Copies by
	// the first scope", "Classes before the locality"); with network first
	// OtherNetworks is set too. OneRank: they are one priority (no failover
	// rules), drawn by locality across those values.
	OtherValues string `json:"other_values,omitempty"`
	OneRank     bool   `json:"one_rank,omitempty"`
	// Localities: where istiod turns Envoy's locality weighted LB on, the
	// localities the priority's load is drawn among (shared's
	// Service.LocalityShares); empty when it draws none.
	Localities []localityLoad `json:"localities,omitempty"`
}

// localityLoad is one locality of a priority and its shares: of the
// priority's healthy and degraded load, and of the source's traffic, in
// percent (Envoy's effectiveLocalityWeight over the priority's sum).
type localityLoad struct {
	Locality      string   `json:"locality"` // its values of the scopes up to the locality depth, "/"-joined ("*" for the network of an other-networks priority's)
	Healthy       int      `json:"healthy"`
	Degraded      int      `json:"degraded"`
	HealthyShare  float64  `json:"healthy_share"`
	DegradedShare float64  `json:"degraded_share"`
	Share         float64  `json:"share"`
	Endpoints     []string `json:"endpoints"` // its healthy, then degraded endpoints
}

// distributeLoad is the distribute rule that applies to the source and its
// targets' shares (shared.Loads.Targets, TargetShare).
type distributeLoad struct {
	Rule    int               `json:"rule"` // 1-based; 0: no rule's from matches (every locality)
	Targets []distributeShare `json:"targets"`
}

type distributeShare struct {
	To       string  `json:"to"`
	Weight   int     `json:"weight"`
	Healthy  int     `json:"healthy"`
	Degraded int     `json:"degraded"`
	Total    int     `json:"total"`
	Share    float64 `json:"share"` // percent of the source's traffic
}

func distributeOf(l *shared.Loads) *distributeLoad {
	if l.NTargets == 0 {
		return nil
	}
	d := &distributeLoad{Rule: l.Rule}
	for i, t := range l.Targets[:l.NTargets] {
		d.Targets = append(d.Targets, distributeShare{To: t.Pattern, Weight: int(t.Weight), Healthy: int(t.Counts.Healthy),
			Degraded: int(t.Counts.Degraded), Total: int(t.Counts.Total), Share: math.Round(1e4*l.TargetShare(i)) / 100})
	}
	return d
}

// localityLoads is priority p's locality level (nil when it draws none).
func localityLoads(in *treeInput, svc *shared.Service, l *shared.Loads, p int) []localityLoad {
	var out []localityLoad
	_, differs, nets := svc.PriorityClass(l, p)
	for _, ls := range svc.LocalityShares(l, p) {
		ll := localityLoad{
			Locality: localityName(in, svc, ls, differs, nets), Healthy: ls.Eligible.Len(), Degraded: ls.Degraded.Len(),
			HealthyShare: percent2(ls.HealthyShare), DegradedShare: percent2(ls.DegradedShare),
			Share: percent2((float64(l.Healthy[p])*ls.HealthyShare + float64(l.Degraded[p])*ls.DegradedShare) / 100),
		}
		for _, sp := range []shared.Span{ls.Eligible, ls.Degraded} {
			ll.Endpoints = append(ll.Endpoints, endpointAddrs(in.tree, sp.Lo, sp.Hi)...)
		}
		out = append(out, ll)
	}
	return out
}

// percent2 is a share (0..1) in percent, rounded to two decimals.
func percent2(share float64) float64 { return math.Round(1e4*share) / 100 }

// localityName is a locality's scope values up to the service's locality
// depth: from the tree for one with a healthy endpoint, else from the
// topology by its first degraded endpoint's address (an encoded tree keeps
// no names of degraded-only localities: "?"). A locality of an
// other-networks priority spans those networks: "*" for its network.
func localityName(in *treeInput, svc *shared.Service, ls shared.LocalityShare, differs int, nets bool) string {
	name := localityScopeValues(in, svc, ls)
	if differs >= 0 && name != nil {
		// the scope the class differs at, and those after it before the
		// locality (the class spans their values); a network too when
		// the endpoints are on other networks
		first := svc.FirstLocality()
		if nets && differs == 0 {
			first = 1 // the network rule's copies: ranked by every scope after network
		}
		for i := range name {
			if i >= differs && i < max(first, differs+1) || i == 0 && nets {
				name[i] = "*"
			}
		}
	}
	if name == nil {
		return "?"
	}
	return joinSafe(name, "/")
}

// localityScopeValues are localityName's values, or nil.
func localityScopeValues(in *treeInput, svc *shared.Service, ls shared.LocalityShare) []string {
	d := svc.LocalityDepth()
	if ls.Eligible.Len() > 0 {
		if v := svc.EndpointValues(ls.Eligible.Lo); len(v) >= d {
			return v[:d]
		}
	}
	if in.top == nil || ls.Degraded.Len() == 0 {
		return nil
	}
	addr := in.tree.Endpoint(ls.Degraded.Lo).Addr
	for _, spec := range in.top.Services {
		if spec.Name != svc.Name() {
			continue
		}
		for _, e := range spec.Endpoints {
			if ap, err := netip.ParseAddrPort(e.Address); err == nil && netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) == addr {
				v := make([]string, d)
				for i, sc := range svc.Scopes()[:d] {
					v[i] = e.Locality[sc]
				}
				return v
			}
		}
	}
	return nil
}

// pickLoads picks --count times by the priority loads of a spillover service.
func pickLoads(in *treeInput, svc *shared.Service, src shared.Locality, o *treePickOptions, res *pickResult) {
	t := in.tree
	l := svc.Loads(src)
	for p := range l.N {
		c := l.Counts[p]
		matched, differs, otherNets := svc.PriorityClass(&l, p)
		other := ""
		if differs >= 0 {
			other = svc.Scopes()[differs]
		}
		res.Loads = append(res.Loads, priorityLoad{
			Priority: p, Matched: matched, Failover: [3]string{"", "to", "other"}[l.Failover[p]],
			OtherNetworks: otherNets, OtherValues: other, OneRank: svc.OneRank(&l, p),
			Healthy: int(c.Healthy), Degraded: int(c.Degraded), Total: int(c.Total),
			HealthyLoad: int(l.Healthy[p]), DegradedLoad: int(l.Degraded[p]), Panic: l.InPanic(p),
			Localities: localityLoads(in, svc, &l, p),
		})
	}
	res.Distribute = distributeOf(&l)
	if l.N == 0 {
		res.Error = noLoadsReason(svc, &l)
		return
	}
	p := shared.NewPicker(t, shared.PickerOptions{Seed: o.seed})
	key := shared.HashKey(o.key)
	for range o.count {
		if ep, ok := p.PickLoads(svc, &l, key); ok {
			res.Picks[t.Endpoint(ep).Addr.String()]++
		}
	}
}

func runTreePick(cmd *cobra.Command, o *treePickOptions) error {
	if err := checkFormat(o.format, "table", "json", "yaml"); err != nil {
		return err
	}
	if o.count < 0 || o.count > 100_000_000 {
		return fmt.Errorf("--count %d: want 0 to 100000000", o.count)
	}
	in, err := loadTreeInput(o.file)
	if err != nil {
		return err
	}
	printWarnings(cmd.ErrOrStderr(), in.name, in.warnings)
	t := in.tree
	svc, ok := t.Service(o.service)
	if !ok {
		return fmt.Errorf("%w %q in %s (services: %s)", shared.ErrUnknownService, o.service, in.name, serviceNames(t))
	}
	src, err := sourceLocality(in, svc, o)
	if err != nil {
		return err
	}
	r := svc.Lookup(src)
	res := pick(t, svc, r, o)
	var typo string
	res.Notes, typo = explainMatch(svc, in.top, src, r)
	switch {
	case typo != "" && res.Error != "":
		res.Error += ": " + typo
	case typo != "":
		fmt.Fprintf(cmd.ErrOrStderr(), "loctree: warning: %s\n", typo)
	}
	if svc.OverprovisioningFactor() != 0 {
		res.Picks, res.Error = map[string]int{}, ""
		pickLoads(in, svc, src, o, res)
	}
	if isData(o.format) {
		if err := writeData(cmd.OutOrStdout(), o.format, res); err != nil {
			return err
		}
	} else {
		drawPick(cmd.OutOrStdout(), svc, src, r, res)
	}
	if res.Error != "" {
		return &exitError{code: exitNoCandidate, err: fmt.Errorf("%s", res.Error)}
	}
	return nil
}

func serviceNames(t *shared.Tree) string {
	var names []string
	for _, s := range t.Services() {
		names = append(names, s.Name())
	}
	return strings.Join(names, ", ")
}

// sourceLocality reads --from (or --node) and rejects scopes the service does
// not route on, so that a typo is not silently read as an empty value.
func sourceLocality(in *treeInput, svc *shared.Service, o *treePickOptions) (shared.Locality, error) {
	if o.node != "" {
		if in.top == nil {
			return nil, fmt.Errorf("--node needs a topology (its nodes: section); %s is an encoded tree: use --from", in.name)
		}
		return topology.NodeLocality(in.top, o.node)
	}
	src, err := loader.ParseLocality(o.from)
	if err != nil {
		return nil, fmt.Errorf("bad --from: %w", err)
	}
	for k := range src {
		if !slices.Contains(svc.Scopes(), k) {
			return nil, fmt.Errorf("bad --from: %q is not a scope of %s (its scopes: %s)", k, svc.Name(), strings.Join(svc.Scopes(), ", "))
		}
	}
	return src, nil
}

// pick picks --count times in the candidate range r of svc.
func pick(t *shared.Tree, svc *shared.Service, r shared.Range, o *treePickOptions) *pickResult {
	res := &pickResult{
		Service: svc.Name(), Mode: svc.Mode().String(), Scopes: svc.Scopes(), Matched: r.Depth, CrossNetwork: svc.CrossNetwork(r),
		Candidates: endpointAddrs(t, r.Lo, r.Hi), Picks: map[string]int{},
	}
	if r.Len() == 0 {
		res.Error = noCandidateReason(svc, r)
		return res
	}
	p := shared.NewPicker(t, shared.PickerOptions{Seed: o.seed})
	key := shared.HashKey(o.key)
	for range o.count {
		ep, _ := p.Pick(svc, r, key)
		res.Picks[t.Endpoint(ep).Addr.String()]++
	}
	return res
}

func noCandidateReason(svc *shared.Service, r shared.Range) string {
	if svc.EligibleCount() == 0 {
		return fmt.Sprintf("%s: %v: the service has no eligible endpoint", svc.Name(), shared.ErrNoCandidate)
	}
	if svc.Mode() == shared.ModeFailover && r.Depth < svc.MinRank() {
		return fmt.Sprintf("%s: %v: failover_limit %s and the source matches only %d of %d scopes (%s)",
			svc.Name(), shared.ErrNoCandidate, svc.Scope(svc.MinRank()-1), r.Depth, svc.Levels(), strings.Join(svc.Scopes(), ", "))
	}
	if svc.Mode() == shared.ModeStrict {
		return fmt.Sprintf("%s: %v: strict mode and the source matches only %d of %d scopes (%s)",
			svc.Name(), shared.ErrNoCandidate, r.Depth, svc.Levels(), strings.Join(svc.Scopes(), ", "))
	}
	return fmt.Sprintf("%s: %v: the source matches %d of %d scopes (%s) and no eligible endpoint there",
		svc.Name(), shared.ErrNoCandidate, r.Depth, svc.Levels(), strings.Join(svc.Scopes(), ", "))
}

// noLoadsReason says why a spillover service has no priority for the
// source: its distribute rule sends it only to targets without an eligible
// endpoint, or the reasons of noCandidateReason.
func noLoadsReason(svc *shared.Service, l *shared.Loads) string {
	if l.NTargets == 0 {
		return noCandidateReason(svc, shared.Range{})
	}
	rule := "distribute (no rule's from matches the source: every locality)"
	if l.Rule > 0 && l.Rule <= len(svc.Distribute()) {
		rule = fmt.Sprintf("distribute rule %d (from %s)", l.Rule, safe(svc.Distribute()[l.Rule-1].From))
	}
	var to []string
	for _, t := range l.Targets[:l.NTargets] {
		to = append(to, safe(t.Pattern))
	}
	return fmt.Sprintf("%s: %v: %s sends the source to %s, which have no eligible endpoint",
		svc.Name(), shared.ErrNoCandidate, rule, strings.Join(to, ", "))
}

func drawPick(w io.Writer, svc *shared.Service, src shared.Locality, r shared.Range, res *pickResult) {
	var from []string
	for _, sc := range svc.Scopes() {
		from = append(from, fmt.Sprintf("%s=%q", sc, src[sc]))
	}
	fmt.Fprintf(w, "%s (%s, %s) from %s\n", safe(svc.Name()), svc.Mode(), svc.Policy(), strings.Join(from, " "))
	if res.Loads != nil || svc.OverprovisioningFactor() != 0 {
		drawLoads(w, svc, res)
		return
	}
	if res.CrossNetwork {
		fmt.Fprintf(w, "matched %d of the %s after network: %s\n", res.Matched, plural(svc.Levels()-1, "scope"), plural(len(res.Candidates), "candidate"))
	} else {
		fmt.Fprintf(w, "matched %d of %d scopes: %s\n", res.Matched, svc.Levels(), plural(len(res.Candidates), "candidate"))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "  why: %s\n", n)
	}
	if res.Error != "" {
		return
	}
	total := 0
	for _, n := range res.Picks {
		total += n
	}
	t := svc.Tree()
	for i := r.Lo; i < r.Hi; i++ {
		addr := t.Endpoint(i).Addr.String()
		n := res.Picks[addr]
		fmt.Fprintf(w, "  %-22s %-36s %s %d", addr, joinSafe(svc.EndpointValues(i), "/"), bar(n, total, 30), n)
		if total > 0 {
			fmt.Fprintf(w, " (%.1f%%)", 100*float64(n)/float64(total))
		}
		fmt.Fprintln(w)
	}
}

// drawLoads prints a line per priority, then the picks per endpoint.
func drawLoads(w io.Writer, svc *shared.Service, res *pickResult) {
	for _, l := range res.Loads {
		fo := ""
		if l.Failover != "" {
			fo = " (failover " + l.Failover + ")"
		}
		what := fmt.Sprintf("matched %d of %d%s", l.Matched, svc.Levels(), fo)
		others := "other " + l.OtherValues + " values"
		if l.OtherNetworks {
			others = "other networks"
		}
		switch {
		case l.OneRank:
			what = others + ", one priority"
		case l.OtherValues != "" && svc.ClassesBeforeLocality():
			if l.OtherNetworks && l.OtherValues != "network" {
				others = "other networks, other " + l.OtherValues + " values"
			}
			what = fmt.Sprintf("%s, matched %d of %d%s", others, l.Matched, svc.Levels(), fo)
		case l.OtherValues != "":
			what = fmt.Sprintf("%s, matched %d of the %d after %s%s", others, l.Matched, svc.Levels()-1, l.OtherValues, fo)
		}
		if res.Distribute != nil {
			what = "the distribute targets"
		}
		fmt.Fprintf(w, "P%d  %s: %d healthy, %d degraded of %d; load %d%% healthy, %d%% degraded",
			l.Priority, what, l.Healthy, l.Degraded, l.Total, l.HealthyLoad, l.DegradedLoad)
		if l.Panic {
			fmt.Fprint(w, ", panic (all endpoints)")
		}
		fmt.Fprintln(w)
		drawLocalities(w, l.Localities)
	}
	drawDistribute(w, res.Distribute)
	total := 0
	for _, n := range res.Picks {
		total += n
	}
	addrs := make([]string, 0, len(res.Picks))
	for a := range res.Picks {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs { // only picked addresses: total > 0
		fmt.Fprintf(w, "  %-22s %s %d (%.1f%%)\n", a, bar(res.Picks[a], total, 30), res.Picks[a], 100*float64(res.Picks[a])/float64(total))
	}
}

// drawLocalities prints a line per locality of a priority that draws one.
func drawLocalities(w io.Writer, locs []localityLoad) {
	if len(locs) > 0 {
		fmt.Fprintln(w, "    localities (Envoy's locality weighted LB):")
	}
	for _, l := range locs {
		fmt.Fprintf(w, "      %-30s %d healthy, %d degraded: %.2f%% of the healthy load, %.2f%% of the degraded; %.2f%% of the traffic\n",
			l.Locality, l.Healthy, l.Degraded, l.HealthyShare, l.DegradedShare, l.Share)
	}
}

// drawDistribute prints the distribute rule and a line per target.
func drawDistribute(w io.Writer, d *distributeLoad) {
	if d == nil {
		return
	}
	if d.Rule == 0 {
		fmt.Fprintln(w, "distribute: no rule's from matches the source: every locality")
	} else {
		fmt.Fprintf(w, "distribute rule %d:\n", d.Rule)
	}
	for _, t := range d.Targets {
		fmt.Fprintf(w, "  to %-30s weight %3d: %d healthy, %d degraded of %d; %.2f%% of the traffic\n",
			safe(t.To), t.Weight, t.Healthy, t.Degraded, t.Total, t.Share)
	}
}

func bar(n, total, width int) string {
	if total == 0 {
		return strings.Repeat("·", width)
	}
	full := n * width / total
	return strings.Repeat("█", full) + strings.Repeat("·", width-full)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
