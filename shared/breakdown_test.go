package shared

import (
	"fmt"
	"testing"
)

// BenchmarkPickParts splits BenchmarkPick's leaves=N÷10 and nodes=N÷10
// cases into their parts: the walk with the source's labels hashed
// already, the lookup from a prepared Source, and the pick in a known range.
func BenchmarkPickParts(b *testing.B) {
	for _, mesh := range []string{"leaves", "nodes"} {
		for _, n := range benchSizes {
			top, leaves := meshTopologySubzones(n, max(4, n/180))
			if mesh == "nodes" {
				top, leaves = meshTopologyNodes(n)
			}
			benchPickParts(b, mesh+"=N÷10", n, top, leaves)
		}
	}
}

func benchPickParts(b *testing.B, mesh string, n int, top *Topology, leaves []Locality) {
	{
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		svc, locs := tree.Services()[0], benchSources(leaves)
		srcs := make([]*Source, len(locs))
		for i, l := range locs {
			srcs[i] = NewSource(l)
		}
		labels := make([][MaxLevels]uint64, len(locs))
		ranges := make([]Range, len(locs))
		for i, l := range locs {
			for j, sc := range svc.scopes {
				labels[i][j] = Label(l[sc])
			}
			ranges[i] = svc.LookupSource(srcs[i])
		}
		p := NewPicker(tree, PickerOptions{})
		lv := len(svc.scopes)
		b.Run(fmt.Sprintf("%s/walk/N=%d", mesh, n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if svc.LookupLabels(labels[i%len(labels)][:lv]).Len() == 0 {
					b.Fatal("none")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("%s/source/N=%d", mesh, n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if svc.LookupSource(srcs[i%len(srcs)]).Len() == 0 {
					b.Fatal("none")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("%s/pick/N=%d", mesh, n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, ok := p.Pick(svc, ranges[i%len(ranges)], 0); !ok {
					b.Fatal("none")
				}
				i++
			}
		})
	}
}
