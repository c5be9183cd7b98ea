package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/istio/check"
)

func newIstioCheckCmd() *cobra.Command {
	var (
		agent  string
		window time.Duration
		format string
	)
	cmd := &cobra.Command{
		Use:   "check --agent NODE_IP:15099",
		Short: "Check that an agent is healthy and that the proxies' filters poll it",
		Long: `Read one agent's /healthz and /metrics, wait --window, read /metrics again
and count the tree requests it answered in between. The filters of the
node's proxies poll their agent every refresh_ms (5 s as shipped), so none
in the window means no filter runs on that node: with failStrategy FAIL_OPEN a
WasmPlugin module that cannot be pulled is replaced by an allow-all filter and
nothing else shows it. Exits 1 with the reason when no filter polled, or
when --agent does not answer as a loctree agent.

--agent is HOST:PORT or http://HOST:PORT. The agent listens on its node's
pod-facing address: run this from the node or from a meshed pod on it. The
report's eligible_endpoints are the endpoints traffic can go to (the
agent's loctree_endpoints); tree inspect also counts the others.

Examples:
  loctree istio check --agent 127.0.0.1:15099    # on a node whose agent listens there
  kubectl debug node/NODE -it --image=REGISTRY/loctree@sha256:DIGEST -- loctree istio check --agent NODE_IP:15099 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json", "yaml"); err != nil {
				return err
			}
			base, err := check.AgentURL(agent)
			if err != nil {
				return fmt.Errorf("--agent: %w", err)
			}
			if window <= 0 {
				return fmt.Errorf("--window %s: must be positive, longer than the filters' refresh_ms (5s as shipped)", window)
			}
			client := &http.Client{Timeout: 10 * time.Second}
			r, err := check.Agent(cmd.Context(), client, base, window, func(d time.Duration) {
				fmt.Fprintf(cmd.ErrOrStderr(), "loctree: %s answers as an agent; counting the filters' tree requests for %s\n", base, d)
			})
			if r != nil {
				if werr := printCheck(cmd, format, r); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "the agent's address, NODE_IP:15099 or http://NODE_IP:15099 (required)")
	f.DurationVar(&window, "window", 12*time.Second, "how long to count tree requests (positive; longer than the filters' refresh_ms)")
	addFormatFlag(cmd, &format, "table", "json", "yaml")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

func printCheck(cmd *cobra.Command, format string, r *check.Report) error {
	if isData(format) {
		return writeData(cmd.OutOrStdout(), format, r)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "agent %s healthy=%t generation=%g services=%g eligible_endpoints=%g\ntree requests in %s: %g (503 not ready: %g)\n",
		r.Agent, r.Healthy, r.Generation, r.Services, r.Endpoints, r.Window, r.TreeRequests, r.NotReady)
	return err
}
