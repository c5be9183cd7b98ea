package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/loctree/loctree/internal/manifest"
	"github.com/loctree/loctree/istio"
)

// TestDaemonSetArgs: the agent arguments in istio/base/daemonset.yaml are
// flags `loctree agent` has, with the Kubernetes source selected.
func TestDaemonSetArgs(t *testing.T) {
	cmd := parseAgentArgs(t, "base/daemonset.yaml")
	for flag, want := range map[string]string{"source": "kubernetes", "node": "n1", "cluster-id": "Kubernetes", "listen": "[127.0.0.7]:15099"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
}

// TestAgentSourceFlags: bad --source values and a missing --node fail clearly.
func TestAgentSourceFlags(t *testing.T) {
	for args, want := range map[string]string{
		"agent --source foo --cgroup /x --bpffs /y":        `--source "foo"`,
		"agent --source kubernetes --cgroup /x --bpffs /y": "needs --node",
	} {
		code, _, errs := runCLI(t, strings.Fields(args)...)
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, stderr %q (want %q)", args, code, errs, want)
		}
	}
}

// parseAgentArgs parses the agent container's arguments of a DaemonSet
// file of istio/ as `loctree agent` flags, the downward API's variables
// given values.
func parseAgentArgs(t *testing.T, file string) *cobra.Command {
	t.Helper()
	data, err := istio.Files.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	args := obj.(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0].Args
	if args[0] != "agent" {
		t.Fatalf("%s: args %v do not run the agent", file, args)
	}
	cmd := newAgentCmd()
	expanded := strings.NewReplacer("$(NODE_NAME)", "n1", "$(CLUSTER_ID)", "Kubernetes", "$(HOST_IP)", "127.0.0.7",
		"$(POD_NAMESPACE)", "loctree-system", "$(POD_NAME)", "loctree-agent-x").Replace(strings.Join(args[1:], "\n"))
	if err := cmd.ParseFlags(strings.Split(expanded, "\n")); err != nil {
		t.Fatalf("loctree agent rejects the arguments of %s: %v", file, err)
	}
	return cmd
}
