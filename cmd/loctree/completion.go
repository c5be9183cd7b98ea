package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/shared"
)

// Shell completion (cobra's `loctree completion bash|zsh|fish|powershell`)
// of service names, locality scopes and values and node names, read from
// the command's -f input (default: the embedded example mesh).

// completionInput loads the -f input of the command being completed.
func completionInput(cmd *cobra.Command) *treeInput {
	path, _ := cmd.Flags().GetString("file")
	in, err := loadTreeInput(path)
	if err != nil {
		return nil
	}
	return in
}

func completeServices(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	in := completionInput(cmd)
	if in == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, s := range in.tree.Services() {
		for _, n := range append([]string{s.Name()}, s.Hosts()...) {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completeNodes(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	in := completionInput(cmd)
	if in == nil || in.top == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range in.top.Nodes {
		if strings.HasPrefix(n.Name, toComplete) {
			out = append(out, n.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeLocality completes "scope=value,scope=value": the last element's
// scope from the scopes of --service (or of every service), its value from
// the values of that scope in the tree.
func completeLocality(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	in := completionInput(cmd)
	if in == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	svcs := completionServices(cmd, in.tree)
	done, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	var out []string
	if key, partial, ok := strings.Cut(last, "="); ok {
		for _, v := range localityValues(svcs, key) {
			if strings.HasPrefix(v, partial) {
				out = append(out, done+key+"="+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	for _, sc := range localityScopes(svcs) {
		if strings.HasPrefix(sc, last) && !strings.Contains(","+done, ","+sc+"=") {
			out = append(out, done+sc+"=")
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// completionServices is the --service of the command if it names one,
// else every service.
func completionServices(cmd *cobra.Command, t *shared.Tree) []*shared.Service {
	if name, err := cmd.Flags().GetString("service"); err == nil && name != "" {
		if s, ok := t.Service(name); ok {
			return []*shared.Service{s}
		}
	}
	return t.Services()
}

func localityScopes(svcs []*shared.Service) []string {
	var out []string
	for _, s := range svcs {
		for _, sc := range s.Scopes() {
			if !slices.Contains(out, sc) {
				out = append(out, sc)
			}
		}
	}
	return out
}

func localityValues(svcs []*shared.Service, scope string) []string {
	set := map[string]bool{}
	for _, s := range svcs {
		if d := slices.Index(s.Scopes(), scope); d >= 0 {
			for v := range scopeValues(s, d) {
				set[v] = true
			}
		}
	}
	return sortedKeys(set)
}
