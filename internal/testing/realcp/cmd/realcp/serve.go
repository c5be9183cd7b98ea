package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/loctree/loctree/internal/testing/realcp"
)

// serve runs the control plane in dir until it is told to stop (SIGTERM or
// SIGINT), writing its pid first and its kubeconfig once it is ready.
func serve(ctx context.Context, args []string, stdout io.Writer) error {
	dir, err := dirFlag("serve", args)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return fmt.Errorf("write pid: %w", err)
	}
	cp, err := realcp.Start(ctx, realcp.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if err := realcp.WriteKubeconfig(cp.Admin(), filepath.Join(dir, kubeconfigFile)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ready: %s\n", cp.Host())
	<-ctx.Done()
	return nil
}

// down stops the serve process of dir and removes dir.
func down(ctx context.Context, args []string, stdout io.Writer) error {
	dir, err := dirFlag("down", args)
	if err != nil {
		return err
	}
	pid, ok := running(dir)
	if !ok {
		fmt.Fprintf(stdout, "not running (%s)\n", dir)
		return os.RemoveAll(dir)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still running after 30 s", pid)
		}
	}
	fmt.Fprintf(stdout, "stopped (%s removed)\n", dir)
	return os.RemoveAll(dir)
}
