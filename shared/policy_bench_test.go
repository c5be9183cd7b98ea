package shared

import "testing"

// BenchmarkPickPolicy picks in one range of 16 candidates by round_robin
// and least_request (and random, for scale), with equal weights (Envoy's
// rotation and P2C) and with unequal ones (Envoy's EDF schedule, edf.go).
func BenchmarkPickPolicy(b *testing.B) {
	unequal := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8}
	for _, pol := range []string{"random", "round_robin", "least_request"} {
		for _, c := range []struct {
			name    string
			weights []uint32
		}{{"equal", pickerOnes(16)}, {"unequal", unequal}} {
			tree := pickerTree(b, pol, pickerZone{zone: "b", weights: c.weights})
			svc, r := pickerRange(b, tree, "b")
			p := NewPicker(tree, PickerOptions{})
			b.Run(pol+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p.Pick(svc, r, 0)
				}
			})
		}
	}
}
