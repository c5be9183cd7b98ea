package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tetratelabs/wazero"
	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/cmd/loctree/demo"
	"github.com/loctree/loctree/internal/fileread"
)

type demoOptions struct {
	module   string
	cacheDir string
	duration time.Duration
	format   string
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show both data planes routing by locality on a small mesh on loopback (root)",
		Long: `demo builds a small mesh on this machine's loopback: six backends of one
service on 127.0.77.1-6:9080 in four zones of three regions, the service's VIP
127.77.0.1:9080, the agent (its eBPF programs attached to a cgroup v2 of the
demo's own, its maps pinned in a bpffs of its own) and one proxy per source
locality running the filter (--module) with the tree fetched from the agent.

It then sends traffic from four source localities through both planes: kernel
connections to the VIP from each source's cgroup, and requests through each
source's proxy, and draws where they land, refreshed live, with the zone ×
zone matrix both planes' counters report (the agent's /metrics, the filters'
stats), the cross-zone share and the share with no locality. A third of the
way in, the endpoints of us-east-1a are marked unhealthy (failover within the
region), and two thirds in they come back.

It needs root (BPF programs, cgroup2 and bpffs mounts). Ctrl-C or the end
removes everything it set up (Ctrl-C then exits with status 130); what a demo
killed with SIGKILL left, the next demo removes. -o json (or yaml) prints a summary with, per phase and
source, the candidate set shared computes and the spread each plane gave, and
each plane's traffic matrix at the end.

Examples:
  make wasm && sudo bin/loctree demo
  sudo loctree demo --duration 30s --module bin/loctree.wasm
  sudo loctree demo --duration 6s -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.module, "module", "bin/loctree.wasm", "the loctree filter (make wasm builds it)")
	f.StringVar(&o.cacheDir, "cache-dir", "", "keep the compiled filter in this directory (compile once across runs; the demo does not remove it)")
	f.DurationVar(&o.duration, "duration", 30*time.Second, "how long to run (three phases of a third each; 3s..1h)")
	addFormatFlag(cmd, &o.format, "table", "json", "yaml")
	return cmd
}

func runDemo(cmd *cobra.Command, o *demoOptions) error {
	if err := checkFormat(o.format, "table", "json", "yaml"); err != nil {
		return err
	}
	if o.duration < 3*time.Second || o.duration > time.Hour {
		return fmt.Errorf("--duration %s: want 3s to 1h", o.duration)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("demo needs root: it loads BPF programs and mounts cgroup2 and bpffs (run it with sudo)")
	}
	module, err := fileread.Regular(o.module, maxModuleBytes, "module")
	if err != nil {
		return fmt.Errorf("%w (build the filter with make wasm, or pass --module)", err)
	}
	var logs bytes.Buffer
	cfg := demo.Config{Module: module, Duration: o.duration,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if o.cacheDir != "" {
		if cfg.Cache, err = wazero.NewCompilationCacheWithDir(o.cacheDir); err != nil {
			return fmt.Errorf("--cache-dir: %w", err)
		}
		defer cfg.Cache.Close(context.Background())
	}
	if o.format == "table" {
		cfg.View = cmd.OutOrStdout()
		cfg.Live = isTerminal(cmd.OutOrStdout())
	} else { // nothing is drawn while it runs: say what the wait is for
		fmt.Fprintf(cmd.ErrOrStderr(), "running the demo for %s (three phases); the %s summary follows at the end\n", o.duration, o.format)
	}
	ctx, caught, stop := signalContext(contextOf(cmd))
	defer stop()
	sum, err := demo.Run(ctx, cfg)
	if err != nil {
		if logs.Len() > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s", logs.String())
		}
		return fmt.Errorf("demo: %w", err)
	}
	if isData(o.format) {
		if err := writeData(cmd.OutOrStdout(), o.format, sum); err != nil {
			return err
		}
	} else if sum.Interrupted {
		fmt.Fprintln(cmd.OutOrStdout(), "interrupted: everything the demo set up is removed")
	}
	if sig := caught(); sig != 0 {
		return &exitError{code: 128 + int(sig), err: errors.New("")} // as a shell reports a signal
	}
	return nil
}

// signalContext is ctx cancelled on SIGINT or SIGTERM; caught returns the
// signal that cancelled it (0: none).
func signalContext(ctx context.Context) (_ context.Context, caught func() syscall.Signal, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var got atomic.Int32
	go func() {
		select {
		case s := <-ch:
			got.Store(int32(s.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() syscall.Signal { return syscall.Signal(got.Load()) }, func() { signal.Stop(ch); cancel() }
}

// isTerminal reports whether w is a terminal (the view is then redrawn in
// place).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
