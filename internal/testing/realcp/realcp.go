// Package realcp runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver, built from their Go modules by the module in tools/
// (`make cluster-build`), started on 127.0.0.1 with free ports, a
// throw-away PKI, RBAC on, an admin token and service-account tokens.
//
// Nothing listens outside 127.0.0.0/8. Objects may carry other addresses
// as data only (the API server refuses loopback pod and endpoint
// addresses); nothing connects to them.
//
// A test gets the control plane of its test binary from a Lazy (started
// on first use, ~3 s, stopped by StopAfter in TestMain) and a fresh
// Namespace. Without the binaries the test skips, naming the command that
// builds them; with LOCTREE_REQUIRE_REALCP set (CI) the skip is a failure.
package realcp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The versions the binaries are built at: tools/go.mod pins them
// (TestVersionsMatchTools checks), and the cache directory is keyed by them.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.0"
)

// Environment variables: RequireEnv turns a skip for missing binaries into
// a failure (CI sets it); DirEnv overrides the directory of the binaries.
const (
	RequireEnv = "LOCTREE_REQUIRE_REALCP"
	DirEnv     = "LOCTREE_REALCP_DIR"
)

// The binaries, by their file names in BinDir.
const (
	etcdBin      = "etcd"
	apiserverBin = "kube-apiserver"
)

// BuildCommand is what a user runs to build the binaries.
const BuildCommand = "make cluster-build"

// ErrNoBinaries is returned when the binaries have not been built.
var ErrNoBinaries = errors.New("the real control plane's binaries are not built")

// BinDir is the directory of the binaries: $LOCTREE_REALCP_DIR, else
// <user cache dir>/loctree/realcp/kubernetes-<v>_etcd-<v>.
func BinDir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory (or set %s): %w", DirEnv, err)
	}
	return filepath.Join(cache, "loctree", "realcp", "kubernetes-"+KubernetesVersion+"_etcd-"+EtcdVersion), nil
}

// binaries are the paths of the built binaries.
type binaries struct{ etcd, apiserver string }

// findBinaries returns the binaries in BinDir, or an error wrapping
// ErrNoBinaries that names the command that builds them.
func findBinaries() (binaries, error) {
	dir, err := BinDir()
	if err != nil {
		return binaries{}, err
	}
	b := binaries{etcd: filepath.Join(dir, etcdBin), apiserver: filepath.Join(dir, apiserverBin)}
	for _, p := range []string{b.etcd, b.apiserver} {
		if _, err := os.Stat(p); err != nil {
			return binaries{}, fmt.Errorf("%w: no %s (run `%s`: 10-20 min the first time on 2 cores)", ErrNoBinaries, p, BuildCommand)
		}
	}
	return b, nil
}
