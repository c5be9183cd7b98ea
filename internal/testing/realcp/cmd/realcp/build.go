package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/loctree/loctree/internal/testing/realcp"
)

func build(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	tools := fs.String("tools", "internal/testing/realcp/tools", "the module that pins the binaries' versions")
	istiodTools := fs.String("istiod-tools", "internal/testing/realcp/istiodtools", "the module that pins istiod's version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := realcp.BinDir()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := realcp.Build(ctx, *tools, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "etcd %s and kube-apiserver %s in %s (%.1f s)\n",
		realcp.EtcdVersion, realcp.KubernetesVersion, dir, time.Since(start).Seconds())
	return buildIstiod(ctx, *istiodTools, stdout)
}

func buildIstiod(ctx context.Context, tools string, stdout io.Writer) error {
	dir, err := realcp.IstiodDir()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := realcp.BuildIstiod(ctx, tools, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "istiod (istio.io/istio %s) in %s (%.1f s)\n", realcp.IstioVersion, dir, time.Since(start).Seconds())
	return nil
}
