package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loctree/loctree/internal/testing/realcp"
)

// Files in the state directory.
const (
	pidFile        = "realcp.pid"
	kubeconfigFile = "kubeconfig"
	serveLog       = "realcp.log"
)

func dirFlag(name string, args []string) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dir := fs.String("dir", defaultDir(), "state directory: data, PKI, logs, kubeconfig")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	return filepath.Abs(*dir)
}

// up starts `realcp serve` in its own session, so it outlives this
// command, and waits for its kubeconfig.
func up(ctx context.Context, args []string, stdout io.Writer) error {
	dir, err := dirFlag("up", args)
	if err != nil {
		return err
	}
	if pid, ok := running(dir); ok {
		return fmt.Errorf("already running (pid %d); kubeconfig %s; stop it with `make cluster-down`", pid, filepath.Join(dir, kubeconfigFile))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	start := time.Now()
	exited, err := startServe(dir)
	if err != nil {
		return err
	}
	if err := waitKubeconfig(ctx, dir, exited); err != nil {
		return err
	}
	printUsage(stdout, dir, time.Since(start))
	return nil
}

func startServe(dir string) (<-chan struct{}, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	log, err := os.Create(filepath.Join(dir, serveLog))
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(self, "serve", "--dir", dir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start serve: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return exited, nil
}

func waitKubeconfig(ctx context.Context, dir string, exited <-chan struct{}) error {
	deadline := time.After(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, kubeconfigFile)); err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, serveLog))
			return fmt.Errorf("the control plane did not start:\n%s", log)
		case <-deadline:
			return errors.New("the control plane was not ready within 2 min; see " + filepath.Join(dir, serveLog))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func printUsage(w io.Writer, dir string, took time.Duration) {
	kc := filepath.Join(dir, kubeconfigFile)
	fmt.Fprintf(w, `etcd %s and kube-apiserver %s are running on 127.0.0.1 (ready in %.1f s; state and logs in %s).
kubeconfig (admin): %s

  export KUBECONFIG=%s
  sudo loctree agent --source kubernetes --kubeconfig %s --node NODE \
      --cgroup /sys/fs/cgroup --bpffs /sys/fs/bpf/loctree

The agent reads Services, EndpointSlices, Nodes and Namespaces from it; create a
Node named NODE with topology.kubernetes.io/region and zone labels, and Services
with spec.trafficDistribution: PreferClose and their EndpointSlices. No kubelet or
controller manager runs: nothing writes EndpointSlices for you.
Stop it with: make cluster-down
`, realcp.EtcdVersion, realcp.KubernetesVersion, took.Seconds(), dir, kc, kc, kc)
}

// running returns the pid of the serve process of dir, if it is alive.
func running(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil
}
