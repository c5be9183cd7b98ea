package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

func newAgentCmd() *cobra.Command {
	var (
		cfg       loader.AgentConfig
		locality  string
		cgroupLoc []string
		kube      kubeFlags
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Install the tree into eBPF maps on this node and keep it current",
		Long: `agent builds the tree of a topology, installs it into BPF maps, attaches
loctree's programs to a cgroup v2 (connect4/6, sendmsg4/6, recvmsg4/6,
getpeername4/6, sock_release, sockops) and pins everything under --bpffs, so the kernel
path keeps working while the agent is down. It then watches the topology file
and applies every change (only changed services are rewritten, each one
atomically), and serves /healthz, /metrics and /v1/tree on --listen.

A restarted agent re-adopts what the last one pinned. Pinned maps it cannot
re-adopt (other --max-* values, or an earlier version's map layout) it
replaces: the old programs keep serving until its own are attached.

It needs root, or CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN; --cgroup must be a
directory on a cgroup v2 mount and --bpffs a directory on a bpffs mount
(created if missing). Both are checked, and --locality's keys against the
topology's scopes, before anything is installed. Without --locality the
node has no locality and the agent warns.

Endpoints come from a topology file (--source file), from the Kubernetes API
server (--source kubernetes) or from istiod's workload discovery, the WDS
stream ztunnel reads (--source xds): the agent then balances the services
istiod gives load-balancing scopes (trafficDistribution, internalTraffic
Policy Local) over the endpoints istiod knows, every cluster's included
(docs/AGENT.md, docs/ISTIO.md).

The agent collects garbage at GOGC=50 unless the GOGC environment variable
is set: a node agent's memory is reserved on every node, and the lower
target keeps its peak a fifth lower for a quarter more CPU per change.

Examples:
  loctree agent -f examples/mesh.yaml --locality region=us-east,zone=us-east-1a \
      --cgroup /sys/fs/cgroup --bpffs /sys/fs/bpf/loctree
  loctree agent --once -f examples/mesh.yaml --locality region=us-east,zone=us-east-1a \
      --cgroup /sys/fs/cgroup --bpffs /sys/fs/bpf/loctree
  loctree agent --source xds --xds-address istiod.istio-system.svc:15012 \
      --xds-ca-file /var/run/secrets/istio/root-cert.pem \
      --xds-token-file /var/run/secrets/tokens/istio-token \
      --node "$NODE_NAME" --xds-namespace "$POD_NAMESPACE" --xds-pod-name "$POD_NAME" \
      --cgroup /sys/fs/cgroup --bpffs /sys/fs/bpf/loctree
  loctree agent uninstall --cgroup /sys/fs/cgroup --bpffs /sys/fs/bpf/loctree

(/sys/fs/cgroup on a cgroup v2 host; on a cgroup v1 host mount cgroup2
elsewhere, e.g. /run/loctree/cgroupv2, and give that.)`,
		Args: noSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkAgentFlags(&cfg); err != nil {
				return err
			}
			loc, err := loader.ParseLocality(locality)
			if err != nil {
				return err
			}
			cfg.Locality = loc
			cfg.CgroupLocality = map[string]shared.Locality{}
			for _, s := range cgroupLoc {
				dir, loc, err := loader.ParseCgroupLocality(s)
				if err != nil {
					return err
				}
				cfg.CgroupLocality[dir] = loc
			}
			if err := kube.check(); err != nil {
				return err
			}
			if err := checkAgentSetup(cmd, &cfg, kube.kind); err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				// RATIONALE.md: "Why does the agent collect garbage at GOGC=50?"
				defer debug.SetGCPercent(debug.SetGCPercent(agentGCPercent))
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if cfg.Source, err = kube.open(cfg.Logger); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := loader.Run(ctx, cfg); err != nil {
				return err
			}
			logLeftInPlace(cfg.Logger, &cfg, ctx.Err() != nil)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.Topology, "file", "f", "", "topology file (YAML or JSON), or a directory of them (*.json, *.yaml, *.yml); default: the embedded example mesh")
	kube.register(cmd)
	f.StringVar(&locality, "locality", "", "this node's locality, scope=value,... (e.g. region=r1,zone=z1)")
	f.StringVar(&cfg.Cgroup, "cgroup", "", "cgroup v2 directory to attach the programs to")
	f.StringArrayVar(&cgroupLoc, "cgroup-locality", nil, "CGROUP_DIR:scope=value,...: a cgroup below --cgroup whose workloads have their own locality (repeatable)")
	f.StringVar(&cfg.BPFFS, "bpffs", "", "directory on a bpffs mount for pinned maps and links")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:15099", "address for /healthz, /metrics and /v1/tree (empty: none)")
	f.BoolVar(&cfg.Once, "once", false, "install and exit, leaving the programs attached and pinned")
	f.StringVar(&cfg.TrafficScope, "traffic-scope", loader.DefaultTrafficScope, "scope key /metrics reports the traffic matrix by (loctree_traffic_*: connections by source and destination value, the cross share and the share with no locality); services that do not route by it count as (unknown)")
	f.DurationVar(&cfg.Watch, "watch-interval", time.Second, "how often the topology file (or directory) is checked for changes (positive)")
	capacityFlags(cmd, &cfg.Capacity)
	_ = cmd.RegisterFlagCompletionFunc("locality", completeLocality)
	cmd.MarkFlagRequired("cgroup")
	cmd.MarkFlagRequired("bpffs")
	cmd.AddCommand(newAgentUninstallCmd())
	return cmd
}

// agentGCPercent is the agent's garbage collection target unless GOGC is
// set: the heap may grow by half its live size between collections, not by
// all of it, which keeps a node agent's peak within its memory budget for
// a quarter more CPU per change (docs/PERFORMANCE.md, "The agent on every
// node").
const agentGCPercent = 50

// logLeftInPlace says, when the agent exits after a signal or --once, what
// stays on the node (by design: the kernel path keeps serving without the
// agent) and how to remove it.
func logLeftInPlace(log *slog.Logger, cfg *loader.AgentConfig, signalled bool) {
	why := "--once"
	if signalled {
		why = "signal"
	}
	log.Info("agent exiting; its programs stay attached to the cgroup and its maps pinned, so connections keep being balanced by the last tree; "+
		"a restarted agent re-adopts them, and `loctree agent uninstall --cgroup "+cfg.Cgroup+" --bpffs "+cfg.BPFFS+"` removes them",
		"reason", why, "cgroup", cfg.Cgroup, "bpffs", cfg.BPFFS)
}

// checkAgentSetup checks, before anything is installed, what would
// otherwise fail late or pass silently: locality keys no service routes on,
// no locality at all (a warning), a --cgroup that is not cgroup v2, a
// --bpffs that is not on bpffs, and missing capabilities.
func checkAgentSetup(cmd *cobra.Command, cfg *loader.AgentConfig, source string) error {
	if source == "file" && (len(cfg.Locality) > 0 || len(cfg.CgroupLocality) > 0) {
		// Read once more here (the agent reads it again) so that a typo
		// fails before anything is installed.
		if scopes, name, ok := agentScopes(cfg.Topology); ok {
			if err := checkLocalityKeys("--locality", cfg.Locality, scopes, name); err != nil {
				return err
			}
			for _, loc := range cfg.CgroupLocality {
				if err := checkLocalityKeys("--cgroup-locality", loc, scopes, name); err != nil {
					return err
				}
			}
		}
	}
	if source == "file" && len(cfg.Locality) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "loctree: warning: no --locality: connections from this node match only endpoints "+
			"whose scope values are empty, so every failover service spreads over all its endpoints and strict services refuse; "+
			"give this node's locality, e.g. --locality region=us-east,zone=us-east-1a")
	}
	if err := kernel.CheckCgroup(cfg.Cgroup); err != nil {
		return fmt.Errorf("--cgroup %s: %w", cfg.Cgroup, err)
	}
	if cfg.BPFFS != "" {
		if err := kernel.CheckBPFFS(cfg.BPFFS); err != nil {
			return fmt.Errorf("--bpffs %s: %w", cfg.BPFFS, err)
		}
	}
	return kernel.CheckCapabilities("loctree agent", kernel.Load|kernel.Attach)
}

// checkAgentFlags range-checks the numeric flags before anything runs.
func checkAgentFlags(cfg *loader.AgentConfig) error {
	if cfg.Watch <= 0 {
		return fmt.Errorf("--watch-interval %s: must be positive", cfg.Watch)
	}
	if strings.TrimSpace(cfg.TrafficScope) == "" {
		return fmt.Errorf("--traffic-scope %q: must name a scope key (region, zone, subzone, node, or a label key the services route by)", cfg.TrafficScope)
	}
	return checkCapacity(cfg.Capacity)
}

// checkCapacity refuses 0 (the installer would silently use the default)
// and sizes beyond what a tree can hold (docs/FORMAT.md limits; nodes and
// endpoints twice, for the old and the new copy during an update).
func checkCapacity(c kernel.Capacity) error {
	for _, f := range []struct {
		flag   string
		v, max uint32
	}{
		{"--max-services", c.Services, shared.MaxServices},
		{"--max-nodes", c.Nodes, 2 * shared.MaxNodes},
		{"--max-endpoints", c.Endpoints, 2 * shared.MaxEndpoints},
		{"--max-sockets", c.Sockets, 1 << 24},
		{"--max-traffic", c.Traffic, 1 << 24},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("%s %d: must be 1..%d", f.flag, f.v, f.max)
		}
	}
	return nil
}

func capacityFlags(cmd *cobra.Command, c *kernel.Capacity) {
	d := kernel.DefaultCapacity()
	f := cmd.Flags()
	f.Uint32Var(&c.Services, "max-services", d.Services, "capacity: services with a VIP (1..65536)")
	f.Uint32Var(&c.Nodes, "max-nodes", d.Nodes, "capacity: tree nodes of all services and their child tables, about 3 entries per node (updates need room for old and new copies; 1..2^26)")
	f.Uint32Var(&c.Endpoints, "max-endpoints", d.Endpoints, "capacity: eligible endpoints of all services (updates need room for old and new copies; 1..2^25)")
	f.Uint32Var(&c.Traffic, "max-traffic", d.Traffic, "capacity: (source cgroup, service, backend) keys the kernel's traffic counts keep at once (1..2^24; keys of endpoints gone from the tree are freed); new picks of more count in loctree_traffic_connections_total as (other)")
	f.Uint32Var(&c.Sockets, "max-sockets", d.Sockets, "capacity: redirected sockets open at once (beyond it new ones are redirected without getpeername rewrite or connection count; 1..2^24); also the consistent_hash session affinities (client × service) kept, least recently used dropped first")
}

func newAgentUninstallCmd() *cobra.Command {
	var cgroup, bpffs string
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Detach loctree's programs and remove its pinned maps and links",
		Long: `uninstall detaches the programs the agent pinned under --bpffs, removes the
pins and prints each one it removed. Running it again is fine (it says there
was nothing to remove). With --cgroup it then checks that no loctree program
is still attached to that cgroup.

It needs root or CAP_BPF (and CAP_NET_ADMIN with --cgroup; naming the
programs still attached needs CAP_SYS_ADMIN, and without it the check says
so and passes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bpffs == "" {
				return errors.New("--bpffs is required")
			}
			need := kernel.Pins
			if cgroup != "" {
				need |= kernel.Attach
			}
			if err := kernel.CheckCapabilities("loctree agent uninstall", need); err != nil {
				return err
			}
			return uninstall(cmd.OutOrStdout(), cgroup, bpffs)
		},
	}
	cmd.Flags().StringVar(&cgroup, "cgroup", "", "cgroup v2 directory the programs were attached to")
	cmd.Flags().StringVar(&bpffs, "bpffs", "", "directory on a bpffs mount the agent pinned into")
	return cmd
}
