package istio

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestXDSOverlay: overlays/xds builds, and its agent runs --source xds with
// files that its volumes provide: the CA file is root-cert.pem of the
// istio-ca-root-cert ConfigMap, the token file a projected token of
// audience istio-ca; every $(VAR) the arguments name is in the container's
// environment (the base's NODE_NAME, HOST_IP, CLUSTER_ID kept, the pod's
// name and namespace added), the base's own mounts are still there, and no
// ClusterRole is granted (the agent calls no Kubernetes API).
func TestXDSOverlay(t *testing.T) {
	out, err := kustomizeBuild("overlays/xds", "wasmURL="+testWasmURL+"\n")
	if err != nil {
		t.Fatal(err)
	}
	ds := objectIn[*appsv1.DaemonSet](t, out)
	if strings.Contains(string(out), "kind: ClusterRole") {
		t.Error("the xds agent calls no Kubernetes API, yet the overlay grants it a ClusterRole")
	}
	pod := ds.Spec.Template.Spec
	agent := pod.Containers[0]
	flags := map[string]string{}
	for _, a := range agent.Args[1:] {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	if flags["source"] != "xds" || flags["xds-address"] != "istiod.istio-system.svc:15012" {
		t.Errorf("args %v", agent.Args)
	}
	env := map[string]bool{}
	for _, e := range agent.Env {
		env[e.Name] = true
	}
	for _, m := range regexp.MustCompile(`\$\((\w+)\)`).FindAllStringSubmatch(strings.Join(agent.Args, " "), -1) {
		if !env[m[1]] {
			t.Errorf("the arguments name $(%s), which the container's environment does not define", m[1])
		}
	}
	ca := volumeOf(t, pod, agent, flags["xds-ca-file"])
	if ca.ConfigMap == nil || ca.ConfigMap.Name != "istio-ca-root-cert" || path.Base(flags["xds-ca-file"]) != "root-cert.pem" {
		t.Errorf("--xds-ca-file %s: volume %+v, want root-cert.pem of the ConfigMap istio-ca-root-cert", flags["xds-ca-file"], ca.VolumeSource)
	}
	tok := volumeOf(t, pod, agent, flags["xds-token-file"])
	if tok.Projected == nil || len(tok.Projected.Sources) != 1 || tok.Projected.Sources[0].ServiceAccountToken == nil ||
		tok.Projected.Sources[0].ServiceAccountToken.Audience != "istio-ca" || tok.Projected.Sources[0].ServiceAccountToken.Path != path.Base(flags["xds-token-file"]) {
		t.Errorf("--xds-token-file %s: volume %+v, want a projected token of audience istio-ca at that path", flags["xds-token-file"], tok.VolumeSource)
	}
	for _, m := range []string{"/sys/fs/bpf", "/run/loctree/cgroupv2"} {
		if !slices.ContainsFunc(agent.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == m }) {
			t.Errorf("the base's mount %s is gone", m)
		}
	}
}

// volumeOf is the volume mounted where file lies.
func volumeOf(t *testing.T, pod corev1.PodSpec, c corev1.Container, file string) corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if path.Dir(file) == m.MountPath {
			for _, v := range pod.Volumes {
				if v.Name == m.Name {
					return v
				}
			}
		}
	}
	t.Fatalf("no volume is mounted at %s", path.Dir(file))
	return corev1.Volume{}
}
