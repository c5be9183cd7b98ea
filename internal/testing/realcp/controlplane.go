package realcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// ControlPlane is a running etcd and kube-apiserver on 127.0.0.1.
type ControlPlane struct {
	dir, ownDir   string // ownDir: removed by Stop
	bins          binaries
	pki           *pki
	adminToken    string
	etcdURL       string
	etcdPeerURL   string
	apiserverPort int
	launch        *launcher
	etcd          *process
	apiserver     *process
	extraArgs     []string
}

// Options configures Start.
type Options struct {
	// Dir holds the data, PKI and logs; empty: a new temporary directory,
	// removed by Stop.
	Dir string
	// APIServerArgs are more kube-apiserver flags, e.g.
	// --feature-gates=WatchList=false.
	APIServerArgs []string
}

// startTimeout bounds each process's start to ready.
const startTimeout = 60 * time.Second

// Start starts etcd and kube-apiserver and waits for the API server's
// /readyz. It returns an error wrapping ErrNoBinaries when they are not built.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{dir: opts.Dir, bins: bins, extraArgs: opts.APIServerArgs}
	if cp.dir == "" {
		if cp.dir, err = os.MkdirTemp("", "loctree-realcp-"); err != nil {
			return nil, fmt.Errorf("make the control plane's directory: %w", err)
		}
		cp.ownDir = cp.dir
	}
	if err := cp.prepare(); err != nil {
		cp.Stop()
		return nil, err
	}
	cp.launch = newLauncher()
	if err := cp.startAll(ctx); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

// prepare writes the PKI, the admin's token file and picks the ports.
func (cp *ControlPlane) prepare() error {
	if err := os.MkdirAll(cp.dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", cp.dir, err)
	}
	p, err := newPKI(cp.dir)
	if err != nil {
		return err
	}
	cp.pki = p
	cp.adminToken = randomToken()
	line := cp.adminToken + ",admin,admin,system:masters\n"
	if err := writeFile(filepath.Join(cp.dir, "tokens.csv"), []byte(line)); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	cp.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	cp.etcdPeerURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.apiserverPort = ports[2]
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePorts returns n distinct ports free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (cp *ControlPlane) startAll(ctx context.Context) error {
	if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	_, err := cp.StartAPIServer(ctx)
	return err
}

// Stop stops the API server, then etcd, and removes the directory Start made.
func (cp *ControlPlane) Stop() {
	if cp.apiserver != nil {
		cp.apiserver.stop(10 * time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.stop(5 * time.Second)
	}
	if cp.launch != nil {
		cp.launch.close()
	}
	if cp.ownDir != "" {
		_ = os.RemoveAll(cp.ownDir)
	}
}

// Dir is the directory of the control plane's data, PKI and logs.
func (cp *ControlPlane) Dir() string { return cp.dir }

// Host is the API server's URL.
func (cp *ControlPlane) Host() string {
	return "https://127.0.0.1:" + strconv.Itoa(cp.apiserverPort)
}

// Admin is a configuration for the admin user (group system:masters).
func (cp *ControlPlane) Admin() *rest.Config { return cp.config(cp.adminToken) }

func (cp *ControlPlane) config(token string) *rest.Config {
	return &rest.Config{
		Host: cp.Host(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             1000, Burst: 2000,
	}
}
