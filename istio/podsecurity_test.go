package istio

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodSecurityAdmits evaluates the agent's pod template with Kubernetes'
// own Pod Security admission checks (k8s.io/pod-security-admission/policy):
// the namespace enforces a level that admits it (privileged: baseline
// rejects it, which is checked too, so the label is needed), and every
// container, init containers included, sets seccompProfile RuntimeDefault
// (the restricted level's seccomp check passes).
func TestPodSecurityAdmits(t *testing.T) {
	ns := decodeFile(t, "base/namespace.yaml")[0].(*corev1.Namespace)
	ds := decodeFile(t, "base/daemonset.yaml")[0].(*appsv1.DaemonSet)
	checkPodSecurity(t, ns, &ds.Spec.Template)
}

func checkPodSecurity(t *testing.T, ns *corev1.Namespace, tmpl *corev1.PodTemplateSpec) {
	t.Helper()
	level, err := psaapi.ParseLevel(ns.Labels[psaapi.EnforceLevelLabel])
	if err != nil {
		t.Fatalf("namespace %s: %s: %v", ns.Name, psaapi.EnforceLevelLabel, err)
	}
	all, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bad := forbidden(all, level, tmpl); len(bad) > 0 {
		t.Errorf("namespace %s enforces %s, which rejects the agent: %s", ns.Name, level, strings.Join(bad, "; "))
	}
	if bad := forbidden(all, psaapi.LevelBaseline, tmpl); len(bad) == 0 {
		t.Error("baseline admits the agent: then the namespace should not need privileged")
	}
	seccomp, err := policy.NewEvaluator([]policy.Check{policy.CheckSeccompProfileRestricted()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bad := forbidden(seccomp, psaapi.LevelRestricted, tmpl); len(bad) > 0 {
		t.Errorf("seccomp: %s", strings.Join(bad, "; "))
	}
}

func forbidden(e policy.Evaluator, level psaapi.Level, tmpl *corev1.PodTemplateSpec) []string {
	var out []string
	for _, r := range e.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec) {
		if !r.Allowed {
			out = append(out, r.ForbiddenReason+" ("+r.ForbiddenDetail+")")
		}
	}
	return out
}
