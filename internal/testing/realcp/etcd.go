package realcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
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

// CompactEtcd compacts etcd's history up to its current revision, so that
// a watch from any earlier resource version gets 410 Gone (expired) and
// its client must list again. It uses etcd's JSON gateway (/v3/kv/...).
func (cp *ControlPlane) CompactEtcd(ctx context.Context) error {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := etcdPost(ctx, cp.etcdURL+"/v3/kv/range", `{"key":"AA=="}`, &rng); err != nil {
		return fmt.Errorf("etcd revision: %w", err)
	}
	body := fmt.Sprintf(`{"revision":%q,"physical":true}`, rng.Header.Revision)
	if err := etcdPost(ctx, cp.etcdURL+"/v3/kv/compaction", body, nil); err != nil {
		return fmt.Errorf("compact etcd at %s: %w", rng.Header.Revision, err)
	}
	return nil
}

func etcdPost(ctx context.Context, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, data)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
