package shared

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

// affinityService is one consistent_hash service with the given session affinity.
func affinityService(policy string, sa *SessionAffinitySpec) *Topology {
	return &Topology{Services: []ServiceSpec{{
		Name: "s", VIP: "127.77.0.1:80", Policy: policy, SessionAffinity: sa,
		Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}},
	}}}
}

// TestSessionAffinityRecord checks the timeout in bytes 52..55 of the
// service record (docs/FORMAT.md) and its decoded value. The default and
// the limit follow Kubernetes: pkg/apis/core/types.go
// DefaultClientIPServiceAffinitySeconds = 10800 and
// MaxClientIPServiceAffinitySeconds = 86400.
func TestSessionAffinityRecord(t *testing.T) {
	cases := []struct {
		name string
		sa   *SessionAffinitySpec
		want uint32
	}{
		{"unset", nil, 0},
		{"default", &SessionAffinitySpec{}, 10800},
		{"two seconds", &SessionAffinitySpec{TimeoutSeconds: u32p(2)}, 2},
		{"maximum", &SessionAffinitySpec{TimeoutSeconds: u32p(86400)}, 86400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, err := Build(affinityService("consistent_hash", c.sa), BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rec := tree.serviceRecord(0)
			if got := binary.LittleEndian.Uint32(rec[52:56]); got != c.want {
				t.Fatalf("record bytes 52..55 = %d, want %d", got, c.want)
			}
			if !allZero(rec[56:64]) {
				t.Fatalf("reserved bytes 56..63 = %v, want zero", rec[56:64])
			}
			back, err := Decode(slices.Clone(tree.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if got := back.Services()[0].affinityTimeout; got != c.want {
				t.Fatalf("decoded AffinityTimeout = %d, want %d", got, c.want)
			}
		})
	}
}

// TestSessionAffinityValidation follows Kubernetes' validateAffinityTimeout
// (pkg/apis/core/validation/validation.go: "must be greater than 0 and less
// than" MaxClientIPServiceAffinitySeconds).
func TestSessionAffinityValidation(t *testing.T) {
	cases := []struct {
		name, policy string
		sa           *SessionAffinitySpec
		want         string
	}{
		{"zero", "consistent_hash", &SessionAffinitySpec{TimeoutSeconds: u32p(0)}, "timeout_seconds 0 (want 1 to 86400"},
		{"over a day", "consistent_hash", &SessionAffinitySpec{TimeoutSeconds: u32p(86401)}, "timeout_seconds 86401 (want 1 to 86400"},
		{"other policy", "random", &SessionAffinitySpec{}, "session_affinity needs policy consistent_hash (policy is random)"},
		{"default policy", "", &SessionAffinitySpec{}, "session_affinity needs policy consistent_hash"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(affinityService(c.policy, c.sa), BuildOptions{})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalidTopology mentioning %q", err, c.want)
			}
		})
	}
}

// TestSessionAffinityCorrupt: a decoder refuses a timeout Build never
// writes.
func TestSessionAffinityCorrupt(t *testing.T) {
	cases := []struct {
		name    string
		policy  byte
		timeout uint32
		want    string
	}{
		{"over a day", byte(PolicyConsistentHash), 86401, "affinity timeout 86401"},
		{"not consistent_hash", byte(PolicyRandom), 5, "affinity timeout 5 with policy random"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, err := Build(affinityService("consistent_hash", &SessionAffinitySpec{}), BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b := slices.Clone(tree.Bytes())
			rec := b[wire.HeaderSize:][:wire.ServiceRecordSize]
			rec[22] = c.policy
			binary.LittleEndian.PutUint32(rec[52:], c.timeout)
			binary.LittleEndian.PutUint32(b[8:], checksum(b)) // header checksum (FORMAT.md, offset 8)
			if _, err := Decode(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrCorrupt mentioning %q", err, c.want)
			}
		})
	}
}
