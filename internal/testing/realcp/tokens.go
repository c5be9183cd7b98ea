package realcp

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceAccountConfig creates the ServiceAccount ns/name if it is missing
// (no controller manager runs to make any) and returns a configuration
// that authenticates as it, system:serviceaccount:<ns>:<name>, with a
// token from the TokenRequest API: what a Pod of that account would use.
// RBAC then allows exactly what is bound to it.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, ns, name string) (*rest.Config, error) {
	admin, err := kubernetes.NewForConfig(cp.Admin())
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", ns, name, err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", ns, name, err)
	}
	return cp.config(tr.Status.Token), nil
}
