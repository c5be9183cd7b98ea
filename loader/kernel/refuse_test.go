package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestLoadAwareRefusedInKernel: the kernel does not implement load_aware
// yet, so a service with it is refused alone, by name and with that reason,
// by Apply and ApplyServices; never installed as if it had no load_aware.
// An installed service that gains load_aware leaves the kernel; once it
// drops it, it is installed again.
func TestLoadAwareRefusedInKernel(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 8, Nodes: 256, Endpoints: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	la := bigService("la", "127.77.9.1:80", 10, 9500)
	la.LoadAware = &shared.LoadAwareSpec{}
	plain := bigService("plain", "127.77.9.2:80", 10, 9500)
	var b shared.Builder
	tree, err := b.Update([]shared.ServiceSpec{la, plain}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.ApplyServices(tree, nil) // the first: a full Apply
	if err != nil {
		t.Fatal(err)
	}
	refusedOnly(t, "Apply", in, res, "la", "plain")

	la.LoadAware = nil
	tree, err = b.Update([]shared.ServiceSpec{la}, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = in.ApplyServices(tree, []string{"la"}); err != nil || res.Refused != nil || len(frontends(t, in)) != 2 {
		t.Fatalf("la without load_aware: %+v, %v, %d frontends; want both installed", res, err, len(frontends(t, in)))
	}

	plain.LoadAware = &shared.LoadAwareSpec{}
	tree, err = b.Update([]shared.ServiceSpec{plain}, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = in.ApplyServices(tree, []string{"plain"}); err != nil {
		t.Fatal(err)
	}
	refusedOnly(t, "ApplyServices", in, res, "plain", "la")
	if res.Removed != 1 {
		t.Fatalf("plain gained load_aware: %d removed, want 1 (it leaves the kernel)", res.Removed)
	}

	la.Endpoints = la.Endpoints[1:] // another service changes: plain stays refused
	tree, err = b.Update([]shared.ServiceSpec{la}, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = in.ApplyServices(tree, []string{"la"}); err != nil {
		t.Fatal(err)
	}
	refusedOnly(t, "ApplyServices of another service", in, res, "plain", "la")
}

// refusedOnly checks that res refuses exactly service refused, for
// load_aware, and that only service installed is in the kernel.
func refusedOnly(t *testing.T, what string, in *Installer, res Result, refused, installed string) {
	t.Helper()
	err := res.Refused[refused]
	if len(res.Refused) != 1 || !errors.Is(err, ErrNotInKernel) || !strings.Contains(err.Error(), "load_aware is not implemented in the kernel yet") ||
		!strings.Contains(err.Error(), `service "`+refused+`"`) {
		t.Fatalf("%s refused %v; want %s alone, for load_aware", what, res.Refused, refused)
	}
	got := frontends(t, in)
	if len(got) != 1 || res.Services != 1 {
		t.Fatalf("%s: %d frontends, %d services installed; want %s's alone", what, len(got), res.Services, installed)
	}
	if _, ok := got[in.byName[installed]]; !ok || in.byName[refused] != (bpf.Frontend{}) {
		t.Fatalf("%s: %s is not installed", what, installed)
	}
}
