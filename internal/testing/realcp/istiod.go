package realcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// IstioVersion is the istio.io/istio version istiod (pilot-discovery) is
// built at: istiodtools/go.mod pins it, and its cache directory is keyed
// by it.
const IstioVersion = "v0.0.0-20260827124520-eed52ebb66ad"

// IstiodDirEnv overrides the directory of the istiod binary.
const IstiodDirEnv = "LOCTREE_REALCP_ISTIOD_DIR"

const istiodBin = "pilot-discovery"

// IstiodNamespace is the namespace istiod runs as (POD_NAMESPACE), its
// root namespace.
const IstiodNamespace = "istio-system"

// IstiodDir is the directory of the istiod binary: $LOCTREE_REALCP_ISTIOD_DIR,
// else <user cache dir>/loctree/realcp/istio-<version>.
func IstiodDir() (string, error) {
	if d := os.Getenv(IstiodDirEnv); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory (or set %s): %w", IstiodDirEnv, err)
	}
	return filepath.Join(cache, "loctree", "realcp", "istio-"+IstioVersion), nil
}

// findIstiod returns the istiod binary, or an error wrapping ErrNoBinaries
// that names the command that builds it.
func findIstiod() (string, error) {
	dir, err := IstiodDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, istiodBin)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w: no %s (run `%s`: about 10 min the first time on 2 cores)", ErrNoBinaries, bin, BuildCommand)
	}
	return bin, nil
}

// BuildIstiod builds istiod into IstiodDir from the module in toolsDir
// (internal/testing/realcp/istiodtools), and copies Istio's CRDs of the
// same version beside it (istioCRDs), unless they are there already.
func BuildIstiod(ctx context.Context, toolsDir string, out io.Writer) error {
	dir, err := IstiodDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	if _, err := findIstiod(); err != nil {
		if err := goBuild(ctx, toolsDir, filepath.Join(dir, istiodBin), "istio.io/istio/pilot/cmd/pilot-discovery", "-s -w", out); err != nil {
			return err
		}
	}
	return copyIstioCRDs(ctx, toolsDir, dir)
}

// Istiod is a running istiod (pilot-discovery) on 127.0.0.1 watching a
// control plane as its admin, serving plaintext xDS (15010's protocol,
// no authentication) on a port of its own.
type Istiod struct {
	cp                       *ControlPlane
	bin, dir                 string
	grpc, http, monitor, ctz int
	secure                   int // TLS xDS, 15012's protocol: a Kubernetes token and istiod's CA
	proc                     *process
	// Env is more environment for the next Start, e.g.
	// PILOT_DEBOUNCE_AFTER=1ms.
	Env []string
}

// RequireIstiod skips the test when istiod or the control plane is not
// built (fails it when RequireEnv is set).
func RequireIstiod(tb testing.TB) {
	tb.Helper()
	Require(tb)
	if _, err := findIstiod(); err != nil {
		skip(tb, "needs istiod: %v", err)
	}
}

// StartIstiod starts an istiod of the test's own on cp, stopped when the
// test ends, and waits for its /ready.
func StartIstiod(tb testing.TB, cp *ControlPlane) *Istiod {
	tb.Helper()
	RequireIstiod(tb)
	i, err := NewIstiod(cp, tb.TempDir())
	if err == nil {
		err = i.Start(context.Background())
	}
	if err != nil {
		tb.Fatalf("start istiod: %v", err)
	}
	tb.Cleanup(i.Stop)
	return i
}

// NewIstiod prepares (but does not start) an istiod on cp whose kubeconfig,
// mesh config and log are in dir.
func NewIstiod(cp *ControlPlane, dir string) (*Istiod, error) {
	bin, err := findIstiod()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	i := &Istiod{cp: cp, bin: bin, dir: dir, grpc: ports[0], http: ports[1], monitor: ports[2], ctz: ports[3], secure: ports[4]}
	if err := WriteKubeconfig(cp.Admin(), filepath.Join(dir, "kubeconfig")); err != nil {
		return nil, err
	}
	mesh := "rootNamespace: " + IstiodNamespace + "\ntrustDomain: cluster.local\n"
	if err := writeFile(filepath.Join(dir, "mesh.yaml"), []byte(mesh)); err != nil {
		return nil, err
	}
	return i, ensureNamespace(cp, IstiodNamespace)
}

func ensureNamespace(cp *ControlPlane, name string) error {
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// XDSAddress is istiod's plaintext xDS address, 127.0.0.1:PORT.
func (i *Istiod) XDSAddress() string { return "127.0.0.1:" + strconv.Itoa(i.grpc) }

// SecureXDSAddress is istiod's TLS xDS address, 127.0.0.1:PORT, as
// 15012 in a cluster: istiod's certificate (names
// istiod.istio-system.svc) chains to its self-signed CA, whose root it
// writes to every namespace's ConfigMap istio-ca-root-cert; a client
// authenticates with a service-account token of audience istio-ca.
func (i *Istiod) SecureXDSAddress() string { return "127.0.0.1:" + strconv.Itoa(i.secure) }

// Log is the path of istiod's log.
func (i *Istiod) Log() string { return filepath.Join(i.dir, "istiod.log") }

// env and args run istiod outside a cluster (docs: ../shared REALCP
// facts): ambient on (WDS), no webhooks, every listener on 127.0.0.1.
func (i *Istiod) env() []string {
	return append([]string{"POD_NAMESPACE=" + IstiodNamespace, "POD_NAME=istiod-test", "REVISION=default",
		"CLUSTER_ID=Kubernetes", "PILOT_ENABLE_AMBIENT=true",
		"INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME="}, i.Env...)
}

func (i *Istiod) args() []string {
	local := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	return []string{"discovery",
		"--kubeconfig", filepath.Join(i.dir, "kubeconfig"), "--meshConfig", filepath.Join(i.dir, "mesh.yaml"),
		"--grpcAddr", local(i.grpc), "--secureGRPCAddr", local(i.secure), "--httpsAddr", "",
		"--httpAddr", local(i.http), "--monitoringAddr", local(i.monitor),
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", strconv.Itoa(i.ctz),
		"--log_output_level", "default:info"}
}

// Start starts istiod (again, on the same ports, after Stop or Kill) and
// waits for its /ready.
func (i *Istiod) Start(ctx context.Context) error {
	if i.cp.launch == nil {
		return errors.New("the control plane is stopped")
	}
	p, err := i.cp.launch.startEnv("istiod", i.env(), i.bin, i.Log(), i.args()...)
	if err != nil {
		return err
	}
	i.proc = p
	client := &http.Client{Timeout: time.Second}
	ready := func(ctx context.Context) error {
		return httpOK(ctx, client, "http://127.0.0.1:"+strconv.Itoa(i.http)+"/ready")
	}
	if err := waitReady(ctx, p, ready); err != nil {
		i.Kill()
		return err
	}
	return nil
}

// Stop stops istiod (SIGTERM, then SIGKILL after 5 s).
func (i *Istiod) Stop() {
	if i.proc != nil {
		i.proc.stop(5 * time.Second)
		i.proc = nil
	}
}

// Kill kills istiod at once.
func (i *Istiod) Kill() {
	if i.proc != nil {
		i.proc.kill()
		i.proc = nil
	}
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: %s", errNotReady, url, resp.Status)
	}
	return nil
}
