package realcp

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// apiserverArgs are the flags that run kube-apiserver outside a cluster
// (../shared/REALCP.md has why each matters): 127.0.0.1 only, RBAC, the
// admin's static token, service-account tokens signed by the PKI's key,
// and nothing that would make it dial a ClusterIP or a webhook.
func (cp *ControlPlane) apiserverArgs(port int) []string {
	return append([]string{
		"--etcd-servers", cp.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", cp.pki.servingCert, "--tls-private-key-file", cp.pki.servingKey,
		"--client-ca-file", cp.pki.clientCA,
		"--token-auth-file", filepath.Join(cp.dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-key-file", cp.pki.saPub,
		"--service-account-signing-key-file", cp.pki.saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", "10.96.0.0/16,fd00:10:96::/112", // data only: dual-stack Services
		"--endpoint-reconciler-type", "none",
		"--disable-admission-plugins", "MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
		"--profiling=false",
		"--cert-dir", filepath.Join(cp.dir, "apiserver-certs-"+strconv.Itoa(port)),
	}, cp.extraArgs...)
}

// StartAPIServer starts kube-apiserver (again, after KillAPIServer: same
// port, PKI and etcd) and waits for its /readyz. It returns the time
// /readyz first answered ok.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) (time.Time, error) {
	p, err := cp.startAPIServer(ctx, cp.apiserverPort)
	if err != nil {
		return time.Time{}, err
	}
	cp.apiserver = p
	return time.Now(), nil
}

// startAPIServer starts a kube-apiserver on port and waits for its /readyz.
func (cp *ControlPlane) startAPIServer(ctx context.Context, port int) (*process, error) {
	log := filepath.Join(cp.dir, "kube-apiserver-"+strconv.Itoa(port)+".log")
	p, err := cp.launch.start("kube-apiserver", cp.bins.apiserver, log, cp.apiserverArgs(port)...)
	if err != nil {
		return nil, err
	}
	cfg := cp.Admin()
	cfg.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("api server client: %w", err)
	}
	ready := func(ctx context.Context) error { return apiserverReady(ctx, client, cfg.Host) }
	if err := waitReady(ctx, p, ready); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// StartSecondAPIServer starts another kube-apiserver on the same etcd and
// PKI, on a port of its own, as an HA control plane has: writes through it
// happen while the first is down. It returns the admin's configuration for
// it and a function that kills it.
func (cp *ControlPlane) StartSecondAPIServer(ctx context.Context) (*rest.Config, func(), error) {
	ports, err := freePorts(2) // two distinct: one is not the first server's
	if err != nil {
		return nil, nil, err
	}
	if ports[0] == cp.apiserverPort {
		ports[0] = ports[1]
	}
	p, err := cp.startAPIServer(ctx, ports[0])
	if err != nil {
		return nil, nil, err
	}
	cfg := cp.Admin()
	cfg.Host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
	return cfg, p.kill, nil
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would, and
// waits until it has exited. etcd keeps running.
func (cp *ControlPlane) KillAPIServer() {
	if cp.apiserver != nil {
		cp.apiserver.kill()
		cp.apiserver = nil
	}
}

func apiserverReady(ctx context.Context, client *http.Client, host string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: kube-apiserver /readyz: %s", errNotReady, resp.Status)
	}
	return nil
}

// waitReady polls ready every 50 ms until it succeeds, the process exits,
// or startTimeout passes.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		attempt, stop := context.WithTimeout(ctx, time.Second)
		err := ready(attempt)
		stop()
		if err == nil {
			return nil
		}
		if exited := p.running(); exited != nil {
			return exited
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %w; end of %s:\n%s", p.name, startTimeout, err, p.log, tail(p.log, 2000))
		case <-tick.C:
		}
	}
}
