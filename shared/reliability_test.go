package shared

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

// Reliability: hostile topologies that issue 9 found accepted. Each case
// names the item of the issue it covers.

func buildOne(t *testing.T, top *Topology) error {
	t.Helper()
	_, err := Build(top, BuildOptions{})
	return err
}

// Item 3: two services with the same VIP:port (also IPv4 and its IPv4-mapped
// IPv6 form) are one frontend; the kernel would serve only one of them.
func TestReliabilityDuplicateVIP(t *testing.T) {
	for _, vips := range [][2]string{
		{"127.77.0.1:80", "127.77.0.1:80"},
		{"127.77.0.1:80", "[::ffff:127.77.0.1]:80"},
		{"[::1]:80", "[::1]:80"},
	} {
		top := &Topology{Services: []ServiceSpec{
			{Name: "a", VIP: vips[0], Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}},
			{Name: "b", VIP: vips[1], Endpoints: []EndpointSpec{{Address: "127.0.0.2:80"}}},
		}}
		err := buildOne(t, top)
		if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
			t.Errorf("vips %v: error %v, want one naming services a and b", vips, err)
		}
	}
	ok := &Topology{Services: []ServiceSpec{
		{Name: "a", VIP: "127.77.0.1:80", Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}},
		{Name: "b", VIP: "127.77.0.1:81", Endpoints: []EndpointSpec{{Address: "127.0.0.2:80"}}},
	}}
	if err := buildOne(t, ok); err != nil {
		t.Errorf("same VIP, different ports: %v", err)
	}
}

// Item 13: control characters in names, hosts, scopes and locality values
// reach terminals and logs; they are rejected, as Kubernetes rejects them in
// label values.
func TestReliabilityControlCharacters(t *testing.T) {
	bad := []string{"a\x00b", "a\x1b[31mb", "a\nb", "a\x7fb", "a\u0085b", "a\xffb"}
	for _, v := range bad {
		for field, mut := range map[string]func(*ServiceSpec){
			"name":     func(s *ServiceSpec) { s.Name = v },
			"host":     func(s *ServiceSpec) { s.Hosts = []string{v} },
			"scope":    func(s *ServiceSpec) { s.Scopes = []string{v} },
			"locality": func(s *ServiceSpec) { s.Endpoints[0].Locality = Locality{"region": v} },
		} {
			s := ServiceSpec{Name: "a", Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}
			mut(&s)
			err := buildOne(t, &Topology{Services: []ServiceSpec{s}})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), "control character") && !strings.Contains(err.Error(), "UTF-8") {
				t.Errorf("%s %q: error %v, want a control character or UTF-8 error", field, v, err)
			}
		}
	}
	s := ServiceSpec{Name: "a.b-c_d/e:f", Hosts: []string{"é.example"}, Endpoints: []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "us east ☃"}}}}
	if err := buildOne(t, &Topology{Services: []ServiceSpec{s}}); err != nil {
		t.Errorf("printable names: %v", err)
	}
}

// Item 16: an endpoint must be a unicast address a connection can go to.
func TestReliabilityNonUnicastEndpoint(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:80", "[::]:80", "255.255.255.255:80", "224.0.0.1:80", "239.1.2.3:80", "[ff02::1]:80", "[::ffff:0.0.0.0]:80", "[::ffff:224.0.0.1]:80"} {
		top := &Topology{Services: []ServiceSpec{{Name: "a", Endpoints: []EndpointSpec{{Address: addr}}}}}
		err := buildOne(t, top)
		if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), "unicast") {
			t.Errorf("endpoint %s: error %v, want a unicast error", addr, err)
		}
		top = &Topology{Services: []ServiceSpec{{Name: "a", VIP: addr, Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}}}
		if err := buildOne(t, top); !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), "vip") {
			t.Errorf("vip %s: error %v, want a unicast error", addr, err)
		}
	}
}

// countingZeros is an endless stream of zero bytes that counts what is read.
type countingZeros struct{ n int }

func (z *countingZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += len(p)
	return len(p), nil
}

// Item 9: a blob is read header first, then exactly the header's size.
func TestReliabilityReadBlobBounded(t *testing.T) {
	z := &countingZeros{}
	if _, err := ReadBlob(z); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "magic") || z.n > wire.HeaderSize {
		t.Fatalf("endless zeros: error %v after %d bytes, want a bad magic after %d", err, z.n, wire.HeaderSize)
	}
	tree, err := Build(&Topology{Services: []ServiceSpec{{Name: "a", Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blob := tree.Bytes()
	got, err := ReadBlob(bytes.NewReader(blob))
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("round trip: %v", err)
	}
	for name, in := range map[string]io.Reader{
		"truncated": bytes.NewReader(blob[:len(blob)-1]),
		"trailing":  io.MultiReader(bytes.NewReader(blob), &countingZeros{}),
		"short":     bytes.NewReader(blob[:10]),
	} {
		if _, err := ReadBlob(in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzReadBlob: ReadBlob returns exactly its input when it accepts it, and
// never reads more than the header promises.
func FuzzReadBlob(f *testing.F) {
	tree, err := Build(&Topology{Services: []ServiceSpec{{Name: "a", Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}}}, BuildOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tree.Bytes())
	f.Add(tree.Bytes()[:wire.HeaderSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ReadBlob(bytes.NewReader(b))
		if err == nil && !bytes.Equal(got, b) {
			t.Fatalf("accepted %d bytes as %d", len(b), len(got))
		}
		if err == nil {
			_, _ = Decode(got)
		}
	})
}
