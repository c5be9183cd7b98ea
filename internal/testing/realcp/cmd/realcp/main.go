// Command realcp builds and runs the real control plane the tests use
// (internal/testing/realcp) for a person: `make cluster-build`, `make
// cluster-up` and `make cluster-down` call it.
//
//	realcp build [--tools DIR] [--istiod-tools DIR]   build etcd, kube-apiserver and istiod into the cache (no-op when built)
//	realcp up [--dir DIR]        start them in the background; print the kubeconfig
//	realcp down [--dir DIR]      stop them and remove DIR
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: realcp build [--tools DIR] [--istiod-tools DIR] | up [--dir DIR] | down [--dir DIR]`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	cmds := map[string]func(context.Context, []string, io.Writer) error{
		"build": build, "up": up, "down": down, "serve": serve,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err := cmd(ctx, args[1:], stdout); err != nil {
		fmt.Fprintf(stderr, "realcp %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// defaultDir is where `up` keeps the running control plane's state.
func defaultDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("loctree-cluster-%d", os.Getuid()))
}
