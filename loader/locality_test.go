package loader

import (
	"maps"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared"
)

func TestParseLocality(t *testing.T) {
	tests := []struct {
		in      string
		want    shared.Locality
		wantErr string
	}{
		{"", shared.Locality{}, ""},
		{"region=r1", shared.Locality{"region": "r1"}, ""},
		{"region=r1, zone=z1,subzone=", shared.Locality{"region": "r1", "zone": "z1", "subzone": ""}, ""},
		{"topology.istio.io/cluster=c1", shared.Locality{"topology.istio.io/cluster": "c1"}, ""},
		{"region", nil, "want scope=value"},
		{"=r1", nil, "want scope=value"},
		{"region=a,region=b", nil, "given twice"},
		{"region=us-east zone=us-east-1a", nil, "separate scope=value pairs with commas"}, // issue 20: two pairs without their comma
		{"region=us east", shared.Locality{"region": "us east"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLocality(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestParseCgroupLocality(t *testing.T) {
	dir, loc, err := ParseCgroupLocality("/sys/fs/cgroup/gw:region=r1,zone=z2")
	if err != nil || dir != "/sys/fs/cgroup/gw" || !maps.Equal(loc, shared.Locality{"region": "r1", "zone": "z2"}) {
		t.Fatalf("got %q %v %v", dir, loc, err)
	}
	for _, bad := range []string{"", "region=r1", ":region=r1", "/cg:region"} {
		if _, _, err := ParseCgroupLocality(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseLocality(f *testing.F) {
	for _, s := range []string{"", "region=r1,zone=z1", "a=b=c", ",", "=", "x=1,x=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := ParseLocality(s)
		if err != nil {
			return
		}
		for k := range loc {
			if k == "" || strings.Contains(k, ",") {
				t.Fatalf("%q gave scope %q", s, k)
			}
		}
	})
}
