package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/shared"
)

func newTreeInspectCmd() *cobra.Command {
	var format, file string
	cmd := &cobra.Command{
		Use:   "inspect [-f TREE|TOPOLOGY|DIR]",
		Short: "Draw a tree, per service, with endpoint counts",
		Long: `Inspect draws each service's tree: one line per node with its scope value
and the number of endpoints below it, siblings in name order; leaves list
their endpoints, and endpoints that are not eligible are listed after the
tree. Each endpoint that is not healthy is marked with its state (degraded,
unhealthy; in an encoded tree under health allow_all, "degraded or
unhealthy": the tree does not tell them apart there). Above the tree are the
service's policy settings: spillover (overprovisioning factor, panic
threshold), failover rules, failover priority (the scopes of a spillover
service that are not the default: Istio's failoverPriority), distribute
rules, failover limit and session affinity. -f (or the one argument, as
before) is an encoded tree (decoded checking every invariant of
docs/FORMAT.md), a topology file or a directory of them (built as tree build
does, its warnings on stderr); without one, the embedded example mesh.

Examples:
  loctree tree inspect
  loctree tree build --out tree.bin && loctree tree inspect -f tree.bin
  loctree tree inspect -f examples/mesh.yaml -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json", "yaml"); err != nil {
				return err
			}
			if len(args) == 1 {
				if file != "" {
					return fmt.Errorf("-f %s and the argument %s: give the file once, with -f", file, args[0])
				}
				file = args[0]
			}
			in, err := loadTreeInput(file)
			if err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), in.name, in.warnings)
			if isData(format) {
				return writeData(cmd.OutOrStdout(), format, inspectJSON(in))
			}
			drawTree(cmd.OutOrStdout(), in)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "encoded tree, topology file or directory of them (default: the embedded examples/mesh.yaml)")
	addFormatFlag(cmd, &format, "table", "json", "yaml")
	return cmd
}

// jsonTree is the -o json shape of inspect.
type jsonTree struct {
	Generation uint64        `json:"generation"`
	Bytes      int           `json:"bytes"`
	Services   []jsonService `json:"services"`
}

type jsonService struct {
	Name       string   `json:"name"`
	Hosts      []string `json:"hosts"`
	VIP        string   `json:"vip,omitempty"`
	Scopes     []string `json:"scopes"`
	Mode       string   `json:"mode"`
	Policy     string   `json:"policy"`
	Health     string   `json:"health"`
	Endpoints  int      `json:"endpoints"`
	Eligible   int      `json:"eligible"`
	Ineligible []string `json:"ineligible"`
	// IneligibleReasons says why each ineligible endpoint is not eligible.
	IneligibleReasons map[string]string `json:"ineligible_reasons"`
	Tree              jsonNode          `json:"tree"`
	// AffinityTimeout is the session affinity timeout of a consistent_hash
	// service (Kubernetes' default when it sets none).
	AffinityTimeout uint32 `json:"session_affinity_timeout_seconds,omitempty"`
	// Distribute are the service's distribute rules (Istio's
	// localityLbSetting.distribute).
	Distribute []shared.DistributeSpec `json:"distribute,omitempty"`
	// NetworkRule is "ztunnel" for a service that applies ztunnel's network
	// rule (docs/FORMAT.md "Network rule").
	NetworkRule string `json:"network_rule,omitempty"`
	// ClassesBeforeLocality are the scopes before the locality whose
	// classes have their own copies (docs/FORMAT.md "Classes before the
	// locality").
	ClassesBeforeLocality []string `json:"classes_before_locality,omitempty"`
	jsonPolicy
}

type jsonNode struct {
	Value     string     `json:"value"`
	Endpoints int        `json:"endpoints"`
	Children  []jsonNode `json:"children,omitempty"`
	Addresses []string   `json:"addresses,omitempty"`
}

func inspectJSON(in *treeInput) jsonTree {
	t := in.tree
	out := jsonTree{Generation: t.Generation(), Bytes: len(t.Bytes()), Services: []jsonService{}}
	for _, s := range t.Services() {
		states := endpointStates(s, in.top)
		js := jsonService{
			Name: s.Name(), Hosts: append([]string{}, s.Hosts()...), Scopes: s.Scopes(),
			Mode: s.Mode().String(), Policy: s.Policy().String(), Health: s.Health().String(),
			Endpoints: int(s.EndpointCount()), Eligible: int(s.EligibleCount()), Ineligible: []string{}, IneligibleReasons: map[string]string{},
			Tree: nodeJSON(s, s.Root()), Distribute: s.Distribute(), jsonPolicy: policyJSON(s, states),
		}
		js.AffinityTimeout, _ = affinityTimeout(s)
		if s.NetworkRule() || s.NetworkRanked() {
			js.NetworkRule = shared.NetworkRuleZtunnel
		}
		if s.ClassesBeforeLocality() {
			sc := s.Scopes()
			js.ClassesBeforeLocality = sc[:s.FirstLocality()]
		}
		if s.VIP().IsValid() {
			js.VIP = s.VIP().String()
		}
		for i := s.EligibleCount(); i < s.EndpointCount(); i++ {
			addr := t.Endpoint(s.FirstEndpoint() + i).Addr.String()
			js.Ineligible = append(js.Ineligible, addr)
			js.IneligibleReasons[addr] = states[i]
		}
		out.Services = append(out.Services, js)
	}
	return out
}

func nodeJSON(s *shared.Service, i uint32) jsonNode {
	t := s.Tree()
	n := t.Node(i)
	jn := jsonNode{Value: s.NodeValue(i), Endpoints: int(n.Hi - n.Lo)}
	for _, k := range childrenByName(s, n) {
		jn.Children = append(jn.Children, nodeJSON(s, k))
	}
	if n.ChildCount == 0 {
		jn.Addresses = endpointAddrs(t, n.Lo, n.Hi)
	}
	return jn
}

func endpointAddrs(t *shared.Tree, lo, hi uint32) []string {
	out := []string{}
	for k := lo; k < hi; k++ {
		out = append(out, t.Endpoint(k).Addr.String())
	}
	return out
}

func drawTree(w io.Writer, in *treeInput) {
	t := in.tree
	fmt.Fprintf(w, "%s: %s\n", safe(in.name), summarize(t, in.name).text())
	for _, s := range t.Services() {
		states := endpointStates(s, in.top)
		drawHeader(w, s)
		drawDistributeRules(w, s.Distribute())
		drawPolicy(w, s)
		if s.NetworkRule() {
			fmt.Fprintf(w, "  network rule: ztunnel (a source on a network without endpoints gets the others ranked by %s)\n", joinSafe(s.Scopes()[1:], "/"))
		}
		switch first := s.Scopes()[0]; {
		case s.NetworkPriorities() && s.OtherValuesMerged():
			fmt.Fprintf(w, "  other %s values: one priority after the source's %s, its localities %s across them (Istio's failoverPriority)\n", safe(first), safe(first), joinSafe(s.Scopes()[1:], "/"))
		case s.NetworkRanked():
			fmt.Fprintf(w, "  network rule: ztunnel (after the source's network, the other networks' endpoints in priorities by %s: Istio's failoverPriority network rule)\n", joinSafe(s.Scopes()[1:], "/"))
		case s.NetworkPriorities():
			fmt.Fprintf(w, "  other %s values: after the source's %s, in priorities by %s (Istio's failoverPriority with failover rules)\n", safe(first), safe(first), joinSafe(s.Scopes()[1:min(s.OtherWalkDepth(), s.Levels())], "/"))
		}
		if s.ClassesBeforeLocality() {
			sc := s.Scopes()
			first := s.FirstLocality()
			how := "one priority each"
			if len(s.Failover()) > 0 {
				how = "each ranked by " + joinSafe(sc[first:min(s.LocalityDepth(), len(sc))], "/") + " and the failover rules"
			}
			fmt.Fprintf(w, "  classes before the locality: the endpoints that differ from the source first at one of %s, %s, their localities across its values (Istio's failoverPriority rank × 5 + LbPriority)\n", joinSafe(sc[:first], ", "), how)
		}
		drawChildren(w, s, states, t.Node(s.Root()), "  ")
		if s.EndpointCount() > s.EligibleCount() {
			fmt.Fprintf(w, "  not eligible: %s\n", strings.Join(endpointLabels(s, states, s.EligibleCount(), s.EndpointCount()), " "))
		}
	}
}

// drawHeader prints a service's name, mode, policy, scopes, VIP, session
// affinity, hosts and endpoint counts.
func drawHeader(w io.Writer, s *shared.Service) {
	fmt.Fprintf(w, "\n%s  %s %s  scopes %s", safe(s.Name()), s.Mode(), s.Policy(), joinSafe(s.Scopes(), "/"))
	if s.VIP().IsValid() {
		fmt.Fprintf(w, "  vip %s", s.VIP())
	}
	if timeout, isDefault := affinityTimeout(s); isDefault {
		fmt.Fprintf(w, "  session affinity %d s (default)", timeout)
	} else if timeout != 0 {
		fmt.Fprintf(w, "  session affinity %d s", timeout)
	}
	fmt.Fprintf(w, "\n  hosts: %s\n  %d endpoints, %d eligible (%s)\n", orNone(s.Hosts()), s.EndpointCount(), s.EligibleCount(), s.Health())
}

// endpointLabels are s's endpoints [lo, hi) (relative to its first) with
// their states, as withState writes them.
func endpointLabels(s *shared.Service, states []string, lo, hi uint32) []string {
	out := make([]string, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, withState(s.Tree().Endpoint(s.FirstEndpoint()+i).Addr, states[i]))
	}
	return out
}

func drawChildren(w io.Writer, s *shared.Service, states []string, n shared.Node, indent string) {
	t := s.Tree()
	kids := childrenByName(s, n)
	for i, k := range kids {
		branch, next := "├─ ", "│  "
		if i == len(kids)-1 {
			branch, next = "└─ ", "   "
		}
		c := t.Node(k)
		v := safe(s.NodeValue(k))
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(w, "%s%s%s (%d)", indent, branch, v, c.Hi-c.Lo)
		if c.ChildCount == 0 {
			first := s.FirstEndpoint()
			fmt.Fprintf(w, "  %s", strings.Join(endpointLabels(s, states, c.Lo-first, c.Hi-first), " "))
		}
		fmt.Fprintln(w)
		drawChildren(w, s, states, c, indent+next)
	}
}

// childrenByName is n's children ordered by their values (the tree orders
// them by label hash, which reads as random).
func childrenByName(s *shared.Service, n shared.Node) []uint32 {
	kids := make([]uint32, 0, n.ChildCount)
	for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
		kids = append(kids, k)
	}
	slices.SortFunc(kids, func(a, b uint32) int { return strings.Compare(s.NodeValue(a), s.NodeValue(b)) })
	return kids
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return joinSafe(s, ", ")
}

// safe returns s as it is when it is printable text, else quoted with Go
// escapes ("evil\x1b[2J"), so a name from a tree built elsewhere cannot
// drive the terminal. Build refuses such names; a blob may still hold them.
func safe(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return s
	}
	return strconv.Quote(s)
}

func joinSafe(list []string, sep string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = safe(s)
	}
	return strings.Join(out, sep)
}

// drawDistributeRules prints a line per distribute rule: from → its
// targets and their weights, in the stored (pattern) order.
func drawDistributeRules(w io.Writer, rules []shared.DistributeSpec) {
	for _, r := range rules {
		var to []string
		for _, p := range slices.Sorted(maps.Keys(r.To)) {
			to = append(to, fmt.Sprintf("%s %d%%", safe(p), r.To[p]))
		}
		fmt.Fprintf(w, "  distribute from %s: %s\n", safe(r.From), strings.Join(to, ", "))
	}
}

// endpointCount is the number of endpoints of all services: the endpoint
// records but the network rule's copies.
func endpointCount(t *shared.Tree) int {
	n := 0
	for _, s := range t.Services() {
		n += int(s.EndpointCount())
	}
	return n
}

// eligibleCount is the number of eligible endpoints of all services (the
// agent's loctree_endpoints gauge counts these).
func eligibleCount(t *shared.Tree) int {
	n := 0
	for _, s := range t.Services() {
		n += int(s.EligibleCount())
	}
	return n
}
