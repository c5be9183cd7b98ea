package realcp

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
)

// startEtcd starts a one-member etcd on 127.0.0.1 and waits for /health.
// Its data is test data: --unsafe-no-fsync.
func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	p, err := cp.launch.start("etcd", cp.bins.etcd, filepath.Join(cp.dir, "etcd.log"),
		"--name", "realcp", "--data-dir", filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls", cp.etcdURL, "--advertise-client-urls", cp.etcdURL,
		"--listen-peer-urls", cp.etcdPeerURL, "--initial-advertise-peer-urls", cp.etcdPeerURL,
		"--initial-cluster", "realcp="+cp.etcdPeerURL, "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	cp.etcd = p
	health := func(ctx context.Context) error { return etcdHealthy(ctx, cp.etcdURL) }
	return waitReady(ctx, p, health)
}

func etcdHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: etcd /health: %s", errNotReady, resp.Status)
	}
	return nil
}
