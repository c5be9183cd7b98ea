package shared

import (
	"fmt"
	"testing"
)

// BenchmarkPickParts splits BenchmarkPick's leaves=N÷10 case into its parts.
func BenchmarkPickParts(b *testing.B) {
	for _, n := range benchSizes {
		tree, svc, locs, srcs := benchTreeSubzones(b, n, max(4, n/180))
		labels := make([][MaxLevels]uint64, len(locs))
		ranges := make([]Range, len(locs))
		for i, l := range locs {
			for j, sc := range svc.Scopes {
				labels[i][j] = Label(l[sc])
			}
			ranges[i] = svc.LookupSource(srcs[i])
		}
		p := NewPicker(tree, PickerOptions{})
		lv := len(svc.Scopes)
		b.Run(fmt.Sprintf("walk/N=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if svc.LookupLabels(labels[i%len(labels)][:lv]).Len() == 0 {
					b.Fatal("none")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("source/N=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if svc.LookupSource(srcs[i%len(srcs)]).Len() == 0 {
					b.Fatal("none")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("pick/N=%d", n), func(b *testing.B) {
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
