package kubernetes

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/internal/testing/syncbuf"
)

// shippedRole is the agent's ClusterRole as istio/base ships it (the Helm
// chart renders the same rules: charts.TestChartEqualsKustomize).
func shippedRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile("../../../istio/base/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	return &role
}

// installDestinationRuleCRD installs Istio's DestinationRule CRD
// (testdata/destinationrule-crd.yaml) once per control plane and waits
// until it is established.
func installDestinationRuleCRD(t *testing.T, r *realServer) {
	t.Helper()
	data, err := os.ReadFile("testdata/destinationrule-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(r.cp.Admin())
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx := context.Background()
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("install the DestinationRule CRD: %v", err)
	}
	eventually(t, 30*time.Second, "the DestinationRule CRD established", func() bool {
		_, err := dyn.Resource(DestinationRuleResource).List(ctx, metav1.ListOptions{})
		return err == nil
	})
}

// captureKlog sends client-go's log (klog: the event broadcaster's
// rejected writes) to a buffer until the test ends.
func captureKlog(t *testing.T) *syncbuf.Buffer {
	t.Helper()
	var buf syncbuf.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("logtostderr", "true")
		_ = fs.Set("stderrthreshold", "ERROR")
		klog.SetOutput(os.Stderr)
	})
	return &buf
}

// runAs binds rules to a new ServiceAccount of the test's namespace (a
// ClusterRole and ClusterRoleBinding owned by the namespace) and runs the
// source with that account's token, logging to log.
func (r *realServer) runAs(t *testing.T, sa string, rules []rbacv1.PolicyRule, log *syncbuf.Buffer) *collector {
	t.Helper()
	return r.runAsWith(t, sa, rules, log, func(err error) bool { return err == nil })
}

// runAsWith is runAs where the source's Run result must satisfy ok.
func (r *realServer) runAsWith(t *testing.T, sa string, rules []rbacv1.PolicyRule, log *syncbuf.Buffer, ok func(error) bool) *collector {
	t.Helper()
	ctx := context.Background()
	name := r.ns + "-" + sa
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: realcp.Owned(r.ns)}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: realcp.Owned(r.ns)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: r.ns, Name: sa}}}
	if _, err := r.admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := r.cp.ServiceAccountConfig(ctx, r.ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	r.waitBound(t, sa, permissions(rules)[0])
	return runFromKubeconfigWith(t, kubeconfig(t, cfg), r.ns+"-a", log, ok)
}

// waitBound waits until the API server's authorizer allows p to service
// account sa: RBAC learns of a new binding through its own informers, and
// a source started before would see 403s that are not the role's.
func (r *realServer) waitBound(t *testing.T, sa string, p permission) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + r.ns + ":" + sa,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: p.group, Resource: p.resource, Verb: p.verb},
	}}
	eventually(t, 10*time.Second, "the binding of "+sa+" in force", func() bool {
		got, err := r.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed
	})
}

// rbacScenario is what exercises every permission of the role: a Node, a
// Service with its EndpointSlice and Namespace, a DestinationRule whose
// localityLbSetting gives the Service its scopes, and a bad annotation
// that goes bad another way and then bad the first way again, so that the
// event recorder creates two Events and patches the first
// (k8s.io/client-go/tools/record/event.go, recordEvent).
func (r *realServer) rbacScenario(t *testing.T) {
	t.Helper()
	r.node(t, "a", zoneLabels("r1", "z1", "s1", "net1"))
	svc := realService("reviews", "")
	svc.Annotations = map[string]string{AnnotationEnabled: "true"}
	r.create(t, svc)
	r.create(t, realSlice("reviews", "reviews-1", "IPv4", []realEP{{addr: "192.0.2.1", node: r.ns + "-a", ready: ptr.To(true)}}))
	r.createDestinationRule(t, "reviews")
}

// createDestinationRule makes host's rule fail over r1 → r2 (with the
// outlier detection Istio requires for locality load balancing).
func (r *realServer) createDestinationRule(t *testing.T, host string) {
	t.Helper()
	dr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
		"metadata": map[string]any{"name": host, "namespace": r.ns},
		"spec": map[string]any{"host": host, "trafficPolicy": map[string]any{
			"outlierDetection": map[string]any{"consecutive5xxErrors": int64(3)},
			"loadBalancer": map[string]any{"localityLbSetting": map[string]any{
				"enabled": true, "failover": []any{map[string]any{"from": "r1", "to": "r2"}}}},
		}},
	}}
	dyn := dynamic.NewForConfigOrDie(r.cp.Admin())
	if _, err := dyn.Resource(DestinationRuleResource).Namespace(r.ns).Create(context.Background(), dr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DestinationRule: %v", err)
	}
}

// badAnnotations sets reviews' mode annotation to each bad value in turn,
// waiting for the source to have seen each.
func (r *realServer) badAnnotations(t *testing.T, modes ...string) {
	t.Helper()
	for _, mode := range modes {
		r.setMode(t, mode)
		time.Sleep(300 * time.Millisecond) // the source reports each bad value once, after its debounce
	}
}

// badAnnotationEvents are the source's Events on reviews: message → count.
func (r *realServer) badAnnotationEvents(t *testing.T) map[string]int32 {
	t.Helper()
	evs, err := r.admin.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range evs.Items {
		if e.Reason == ReasonBadAnnotation && e.InvolvedObject.Name == "reviews" {
			out[e.Message] = e.Count
		}
	}
	return out
}

// failoverScopes: the DestinationRule's failover gives [region zone subzone].
func failoverScopes(name string) func(Update) bool {
	return func(u Update) bool {
		s, ok := findService(u, name)
		return ok && strings.Join(s.Scopes, ",") == "region,zone,subzone"
	}
}

// TestRealServerRBAC runs the source with a service-account token bound
// to exactly the ClusterRole the project ships, on a real API server with
// Istio's DestinationRule CRD: it follows the DestinationRule, writes its
// Warning Events and bumps the repeated one, and neither its log nor
// client-go's holds a 403.
func TestRealServerRBAC(t *testing.T) {
	r := onRealServer(t)
	installDestinationRuleCRD(t, r)
	klogged := captureKlog(t)
	r.rbacScenario(t)
	var log syncbuf.Buffer
	c := r.runAs(t, "loctree-agent", shippedRole(t).Rules, &log)
	c.waitFor(t, 0, "reviews with the DestinationRule's scopes", failoverScopes(r.fqdn("reviews")))
	r.badAnnotations(t, "sticky", "stickier", "sticky")
	eventually(t, 20*time.Second, "two Events, the first bumped to count 2", func() bool {
		evs := r.badAnnotationEvents(t)
		twice := 0
		for _, n := range evs {
			if n >= 2 {
				twice++
			}
		}
		return len(evs) == 2 && twice == 1
	})
	for name, out := range map[string]string{"source": log.String(), "client-go": klogged.String()} {
		if strings.Contains(out, "forbidden") || strings.Contains(out, "403") {
			t.Errorf("the %s log has a 403:\n%s", name, out)
		}
	}
}

// permission is one (API group, resource, verb) of a role.
type permission struct{ group, resource, verb string }

func (p permission) String() string { return p.resource + "." + p.verb }

// denied is how the API server's 403 names p (RBAC's reason).
func (p permission) denied() string { return fmt.Sprintf("cannot %s resource %q", p.verb, p.resource) }

// denied matches the API server's 403 for any permission.
var denied = regexp.MustCompile(`cannot [a-z]+ resource "`)

// permissions splits rules into single permissions.
func permissions(rules []rbacv1.PolicyRule) []permission {
	var out []permission
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, permission{g, res, v})
				}
			}
		}
	}
	return out
}

// without is rules less one permission.
func without(rules []rbacv1.PolicyRule, drop permission) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, p := range permissions(rules) {
		if p != drop {
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{p.group}, Resources: []string{p.resource}, Verbs: []string{p.verb}})
		}
	}
	return out
}

// TestRealServerRBACEachPermission removes one permission of the shipped
// role at a time and runs the same scenario: each removal is a failure
// that names what is missing, in the source's log (an informer that
// cannot list or watch: it never syncs, or never sees a change) or in
// client-go's (an Event the server rejected). The exception, measured: a
// 1.37 server serves the initial state of Services, EndpointSlices, Nodes
// and Namespaces by watch-list (a watch with sendInitialEvents), so the
// source works without their list; on a server without watch-list
// (--feature-gates=WatchList=false, as servers before it had) each list
// is needed. DestinationRules are always listed first (listThenWatch).
func TestRealServerRBACEachPermission(t *testing.T) {
	klogged := captureKlog(t)
	byWatchList := func(p permission) bool { return p.verb == "list" && p.resource != "destinationrules" }
	r := onRealServer(t)
	r.checkEachPermission(t, klogged, func(permission) bool { return true }, byWatchList)
	t.Run("without-watch-list", func(t *testing.T) {
		cp := realcp.StartPrivate(t, realcp.Options{APIServerArgs: []string{"--feature-gates=WatchList=false"}})
		r := &realServer{cp: cp, ns: cp.Namespace(t), admin: k8s.NewForConfigOrDie(cp.Admin())}
		r.checkEachPermission(t, klogged, byWatchList, func(permission) bool { return false })
	})
}

// checkEachPermission runs the scenario once per permission of the
// shipped role that which selects, without it; optional says which the
// source works without (synced, no 403 logged).
func (r *realServer) checkEachPermission(t *testing.T, klogged *syncbuf.Buffer, which, optional func(permission) bool) {
	installDestinationRuleCRD(t, r)
	r.rbacScenario(t)
	rules := shippedRole(t).Rules
	for i, p := range permissions(rules) {
		if !which(p) {
			continue
		}
		t.Run(p.String(), func(t *testing.T) {
			synced, out := r.runWithout(t, klogged, rules, p, fmt.Sprintf("agent-%d", i))
			named := strings.Contains(out, p.denied())
			t.Logf("without %s: synced %v; %s", p, synced, firstLine(out, p.denied()))
			switch {
			case optional(p) && (!synced || denied.MatchString(out)):
				t.Errorf("without %s, which watch-list makes unneeded: synced %v; logs:\n%s", p, synced, firstLine(out, "forbidden"))
			case !optional(p) && !named:
				t.Errorf("without %s no failure names it (synced %v); first 403 logged: %s", p, synced, firstLine(out, "forbidden"))
			}
		})
	}
}

// runWithout runs the scenario with rules less p, as service account sa:
// whether the source synced, and its log and client-go's.
func (r *realServer) runWithout(t *testing.T, klogged *syncbuf.Buffer, rules []rbacv1.PolicyRule, p permission, sa string) (bool, string) {
	t.Helper()
	r.setMode(t, "")
	from := len(klogged.String())
	var log syncbuf.Buffer
	// The source's log is slog text: quotes escaped.
	logs := func() string { return strings.ReplaceAll(log.String()+klogged.String()[from:], `\"`, `"`) }
	unsynced := func(err error) bool { return err == nil || errors.Is(err, ErrNotSynced) }
	c := r.runAsWith(t, sa, without(rules, p), &log, unsynced)
	synced := false
	// Until it syncs (15 s: a loaded CI machine) or the 403 naming p is
	// logged with nothing synced: a source that cannot list never will.
	for deadline := time.Now().Add(15 * time.Second); !synced && time.Now().Before(deadline); {
		synced = c.waitWithin(200*time.Millisecond, failoverScopes(r.fqdn("reviews")))
		if !synced && strings.Contains(logs(), p.denied()) {
			time.Sleep(time.Second) // it would have synced by now if it could
			synced = c.waitWithin(0, failoverScopes(r.fqdn("reviews")))
			break
		}
	}
	if synced {
		r.badAnnotations(t, "sticky", "stickier", "sticky")
		time.Sleep(time.Second) // the recorder writes asynchronously
	}
	return synced, logs()
}

// setMode sets (or, with "", removes) reviews' mode annotation.
func (r *realServer) setMode(t *testing.T, mode string) {
	t.Helper()
	ctx := context.Background()
	svc, err := r.admin.CoreV1().Services(r.ns).Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case mode == "":
		delete(svc.Annotations, AnnotationMode)
	case svc.Annotations == nil:
		svc.Annotations = map[string]string{AnnotationMode: mode}
	default:
		svc.Annotations[AnnotationMode] = mode
	}
	if _, err := r.admin.CoreV1().Services(r.ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// firstLine is the first line of out that contains s.
func firstLine(out, s string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
