package shared

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// newTestBalancer returns a balancer with a seeded random source and the
// given endpoints.
func newTestBalancer(tb testing.TB, policy Policy, addrs ...string) *Balancer {
	tb.Helper()
	b := NewBalancer(policy)
	b.src = newSource(11)
	for _, a := range addrs {
		if err := b.Add(a); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

func balancerAddrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.3.%d:9090", i+1)
	}
	return out
}

// balanceCounts calls Balance n times and counts the answers.
func balanceCounts(tb testing.TB, b *Balancer, n int) map[string]int {
	tb.Helper()
	counts := map[string]int{}
	for k := range n {
		a, err := b.Balance(fmt.Sprint("key-", k))
		if err != nil {
			tb.Fatal(err)
		}
		counts[a]++
	}
	return counts
}

func TestBalancerErrors(t *testing.T) {
	b := NewBalancer(PolicyRoundRobin)
	if _, err := b.Balance("k"); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("Balance on an empty balancer: %v, want ErrNoCandidate", err)
	}
	if err := b.Add("127.0.3.1:9090"); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("127.0.3.1:9090"); !errors.Is(err, ErrDuplicateEndpoint) {
		t.Fatalf("second Add: %v, want ErrDuplicateEndpoint", err)
	}
	if err := b.AddWeighted("127.0.3.1:9090", 5); !errors.Is(err, ErrDuplicateEndpoint) {
		t.Fatalf("AddWeighted of a present address: %v, want ErrDuplicateEndpoint", err)
	}
	if err := b.Remove("127.0.3.2:9090"); !errors.Is(err, ErrUnknownEndpoint) {
		t.Fatalf("Remove of an absent address: %v, want ErrUnknownEndpoint", err)
	}
	if err := b.Add(""); err == nil {
		t.Fatal("Add of an empty address succeeded")
	}
	if err := b.Remove("127.0.3.1:9090"); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove("127.0.3.1:9090"); !errors.Is(err, ErrUnknownEndpoint) {
		t.Fatalf("second Remove: %v, want ErrUnknownEndpoint", err)
	}
	if _, err := b.Balance("k"); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("Balance after removing everything: %v, want ErrNoCandidate", err)
	}
}

func TestBalancerRoundRobinAddRemove(t *testing.T) {
	addrs := balancerAddrs(4)
	b := newTestBalancer(t, PolicyRoundRobin, addrs...)
	const rounds = 250
	for a, n := range balanceCounts(t, b, rounds*4) {
		if n != rounds {
			t.Fatalf("%s picked %d times in %d rounds of 4", a, n, rounds)
		}
	}
	if err := b.Remove(addrs[1]); err != nil {
		t.Fatal(err)
	}
	counts := balanceCounts(t, b, rounds*3)
	if counts[addrs[1]] != 0 || len(counts) != 3 {
		t.Fatalf("after removing %s: %v", addrs[1], counts)
	}
	for a, n := range counts {
		if n != rounds {
			t.Fatalf("%s picked %d times in %d rounds of 3", a, n, rounds)
		}
	}
	if got := b.Endpoints(); fmt.Sprint(got) != fmt.Sprint([]string{addrs[0], addrs[2], addrs[3]}) {
		t.Fatalf("Endpoints() = %v", got)
	}
}

func TestBalancerRandomUniform(t *testing.T) {
	addrs := balancerAddrs(10)
	counts := balanceCounts(t, newTestBalancer(t, PolicyRandom, addrs...), 100_000)
	got := make([]int, len(addrs))
	for i, a := range addrs {
		got[i] = counts[a]
	}
	if chi2 := pickerChiSquare(got, pickerShares(pickerOnes(10))); chi2 > pickerChi2Crit[9] {
		t.Fatalf("random picks %v: chi-square %.2f > %.3f (df 9, p 0.001)", got, chi2, pickerChi2Crit[9])
	}
}

func TestBalancerWeighted(t *testing.T) {
	addrs, weights := balancerAddrs(5), []uint32{5, 0, 1, 3, 11}
	b := newTestBalancer(t, PolicyWeighted)
	for i, a := range addrs {
		if err := b.AddWeighted(a, weights[i]); err != nil {
			t.Fatal(err)
		}
	}
	counts := balanceCounts(t, b, 100_000)
	if counts[addrs[1]] != 0 {
		t.Fatalf("weight-0 endpoint picked %d times", counts[addrs[1]])
	}
	got := []int{counts[addrs[0]], counts[addrs[2]], counts[addrs[3]], counts[addrs[4]]}
	if chi2 := pickerChiSquare(got, []float64{5, 1, 3, 11}); chi2 > pickerChi2Crit[3] {
		t.Fatalf("weighted picks %v for weights 5 1 3 11: chi-square %.2f > %.3f", got, chi2, pickerChi2Crit[3])
	}
}

func TestBalancerConsistentHashRemove(t *testing.T) {
	const k, keys = 20, 20_000
	addrs := balancerAddrs(k)
	b := newTestBalancer(t, PolicyConsistentHash, addrs...)
	pick := func() []string {
		out := make([]string, keys)
		for i := range out {
			out[i], _ = b.Balance(fmt.Sprint("session-", i))
		}
		return out
	}
	before := pick()
	if err := b.Remove(addrs[3]); err != nil {
		t.Fatal(err)
	}
	after := pick()
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
			if before[i] != addrs[3] {
				t.Fatalf("key %d moved from %s, which was not removed", i, before[i])
			}
		} else if after[i] == addrs[3] {
			t.Fatalf("key %d still on the removed %s", i, addrs[3])
		}
	}
	if frac := float64(moved) / keys; frac < 0.7/k || frac > 1.3/k {
		t.Fatalf("%.4f of keys moved when 1 of %d endpoints left, want about %.4f", frac, k, 1.0/k)
	}
	if err := b.Add(addrs[3]); err != nil {
		t.Fatal(err)
	}
	if again := pick(); fmt.Sprint(again) != fmt.Sprint(before) {
		t.Fatal("adding the endpoint back did not restore the key mapping")
	}
}

func TestBalancerLeastConnections(t *testing.T) {
	addrs := balancerAddrs(3)
	b := newTestBalancer(t, PolicyLeastConnections, addrs...)
	b.Inc(addrs[0])
	b.Inc(addrs[0])
	b.Inc(addrs[1])
	b.Inc("127.0.3.99:9090") // unknown: ignored
	if counts := balanceCounts(t, b, 50); counts[addrs[2]] != 50 {
		t.Fatalf("in flight [2 1 0]: %v, want only %s", counts, addrs[2])
	}
	// Counts survive changes of the set.
	if err := b.Add("127.0.3.50:9090"); err != nil {
		t.Fatal(err)
	}
	b.Inc("127.0.3.50:9090")
	b.Inc(addrs[2])
	b.Inc(addrs[2])
	if got := b.InFlight(addrs[0]); got != 2 {
		t.Fatalf("in flight of %s after Add: %d, want 2", addrs[0], got)
	}
	if counts := balanceCounts(t, b, 50); counts[addrs[1]]+counts["127.0.3.50:9090"] != 50 || counts[addrs[1]] == 0 || counts["127.0.3.50:9090"] == 0 {
		t.Fatalf("in flight [2 1 2 1]: %v, want the two 1s, both", counts)
	}
	b.Done(addrs[0])
	b.Done(addrs[0])
	b.Done(addrs[0])
	if got := b.InFlight(addrs[0]); got != 0 {
		t.Fatalf("in flight after 3 Done for 2 Inc: %d, want 0", got)
	}
}

func TestBalancerLeastRequestTwoChoices(t *testing.T) {
	addrs := balancerAddrs(2)
	b := newTestBalancer(t, PolicyLeastRequest, addrs...)
	b.Inc(addrs[1])
	// Envoy's two draws are independent: the busy one wins 1/4 of the picks.
	counts := balanceCounts(t, b, 8000)
	got := []int{counts[addrs[0]], counts[addrs[1]]}
	if chi2 := pickerChiSquare(got, []float64{0.75, 0.25}); chi2 > pickerChi2Crit[1] {
		t.Fatalf("in flight [0 1]: %v, chi-square %.1f > %.3f against Envoy's [3/4 1/4]", counts, chi2, pickerChi2Crit[1])
	}
}

// TestBalancerConcurrent changes the set while other goroutines balance;
// every answer must be an address that was in the set at some point and the
// in-flight counts must return to 0. Run with -race.
func TestBalancerConcurrent(t *testing.T) {
	addrs := balancerAddrs(6)
	for pol := range PolicyConsistentHash + 1 {
		b := newTestBalancer(t, pol, addrs[:3]...)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for k := range 2000 {
					a, err := b.Balance(fmt.Sprint(k))
					if err != nil {
						t.Errorf("%s: %v", pol, err)
						return
					}
					b.Inc(a)
					b.Done(a)
				}
			})
		}
		wg.Go(func() {
			for k := range 200 {
				a := addrs[3+k%3]
				if err := b.Add(a); err != nil {
					t.Error(err)
				}
				if err := b.Remove(a); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		for _, a := range addrs[:3] {
			if n := b.InFlight(a); n != 0 {
				t.Fatalf("%s: %s has %d in flight", pol, a, n)
			}
		}
	}
}

func TestBalancerZeroAllocs(t *testing.T) {
	for pol := range PolicyConsistentHash + 1 {
		b := newTestBalancer(t, pol, balancerAddrs(8)...)
		allocs := testing.AllocsPerRun(1000, func() {
			a, _ := b.Balance("user-7")
			b.Inc(a)
			b.Done(a)
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocs per Balance, want 0", pol, allocs)
		}
	}
}

func BenchmarkBalancer(b *testing.B) {
	for pol := range PolicyConsistentHash + 1 {
		b.Run(fmt.Sprintf("policy=%s/n=100", pol), func(b *testing.B) {
			bal := newTestBalancer(b, pol)
			bal.src = newSource(0)
			for i := range 100 {
				weight := uint32(1)
				if pol == PolicyWeighted {
					weight = uint32(1 + i%3)
				}
				if err := bal.AddWeighted(fmt.Sprintf("127.0.4.%d:80", i+1), weight); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				bal.Balance("user-7")
			}
		})
	}
}

// TestBalancerPickerSameHashKeys: a Balancer and a Picker over the same
// endpoints (and weights) send every consistent_hash key to the same address,
// so a Go proxy, the filter and `loctree tree pick --key` agree.
func TestBalancerPickerSameHashKeys(t *testing.T) {
	for _, weights := range [][]uint32{pickerOnes(7), {1, 3, 2, 5, 1, 1, 4}} {
		tree := pickerTree(t, "consistent_hash", pickerZone{zone: "a", weights: weights})
		svc, r := pickerRange(t, tree, "a")
		p := NewPicker(tree, PickerOptions{Seed: 1})
		b := NewBalancer(PolicyConsistentHash)
		for i := len(weights) - 1; i >= 0; i-- { // another order than the tree's
			if err := b.AddWeighted(pickerAddr(0, i), weights[i]); err != nil {
				t.Fatal(err)
			}
		}
		for k := range 500 {
			key := fmt.Sprint("user-", k)
			ep, _ := p.Pick(svc, r, HashKey(key))
			got, err := b.Balance(key)
			if want := tree.Endpoint(ep).Addr.String(); err != nil || got != want {
				t.Fatalf("weights %v key %q: balancer %q (%v), picker %q", weights, key, got, err, want)
			}
		}
	}
}
