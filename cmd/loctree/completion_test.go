package main

import (
	"strings"
	"testing"
)

// Issue 14, section 4: shell completion of service names, locality scopes
// and values, and node names (cobra's hidden __complete command is what the
// completion scripts call).
func TestCompletion(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"tree", "pick", "--service", "rev"}, []string{"reviews\n", "reviews.default.svc.cluster.local\n"}},
		{[]string{"tree", "pick", "--service", "reviews", "--from", ""}, []string{"region=\n", "zone=\n", "subzone=\n"}},
		{[]string{"tree", "pick", "--service", "reviews", "--from", "region=us-"}, []string{"region=us-east\n", "region=us-west\n"}},
		{[]string{"tree", "pick", "--service", "reviews", "--from", "region=us-east,zone=us-east-1"}, []string{"region=us-east,zone=us-east-1a\n", "region=us-east,zone=us-east-1b\n"}},
		{[]string{"tree", "pick", "--service", "reviews", "--node", "node-"}, []string{"node-a\n"}},
		{[]string{"agent", "--locality", "zo"}, []string{"zone=\n"}},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, append([]string{"__complete"}, c.args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", c.args, code, errs)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: completions lack %q:\n%s", c.args, w, out)
			}
		}
	}
}
