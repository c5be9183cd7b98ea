package kernel

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// bpfMapMappings lists this process's mappings of BPF maps larger than
// min bytes, as "start-end" ranges of /proc/self/maps.
func bpfMapMappings(t *testing.T, min uint64) []string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "bpf-map") {
			continue
		}
		r, _, _ := strings.Cut(line, " ")
		lo, hi, _ := strings.Cut(r, "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("/proc/self/maps: %q", line)
		}
		if b-a > min {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMapsNotMappedBetweenWrites: the installer maps only the pages of a
// write, for the write. The kernel inserts every page of an array map's
// area into a mapping when it is made, so a mapping kept open counts the
// node and endpoint maps whole in the agent's resident set (20.5 MB at the
// default capacity) whatever it writes.
func TestMapsNotMappedBetweenWrites(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var b shared.Builder
	var specs []shared.ServiceSpec
	for i := range 8 {
		specs = append(specs, bigService(fmt.Sprintf("svc-%d", i), fmt.Sprintf("127.77.9.%d:80", i+1), 500, 9500))
	}
	tree, err := b.Update(specs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(tree, nil); err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, in, tree)
	if m := bpfMapMappings(t, 1<<20); len(m) > 0 {
		t.Fatalf("after an install, BPF maps still mapped into the agent:\n%s", strings.Join(m, "\n"))
	}
}

// TestMapWindowBounds: an access outside the map's area is an error, not a
// write into whatever the page after it holds.
func TestMapWindowBounds(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 4, Nodes: 1024, Endpoints: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	w := in.k.eps
	buf := make([]byte, 64)
	for _, off := range []int64{-1, w.size - 63, w.size} {
		if _, err := w.WriteAt(buf, off); err == nil {
			t.Errorf("write of 64 bytes at %d of a %d-byte map: no error", off, w.size)
		}
	}
	if n, err := w.WriteAt(buf, w.size-64); err != nil || n != 64 {
		t.Fatalf("write of the last 64 bytes: %d, %v", n, err)
	}
	want := []byte("the last bytes of the endpoints map, across no page boundary ..")
	if _, err := w.WriteAt(want, w.size-int64(len(want))); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := w.ReadAt(got, w.size-int64(len(want))); err != nil || string(got) != string(want) {
		t.Fatalf("read back %q, %v", got, err)
	}
}

// BenchmarkMapWrite writes one service's endpoint records (1,000
// endpoints, 32 KB) into the endpoints map through a window made for the
// write, as the installer does, and through a mapping of the whole map kept
// open, as it did: the price of keeping the maps out of the agent's RSS.
func BenchmarkMapWrite(b *testing.B) {
	kerneltest.RequireRoot(b)
	in, err := Open(Config{Locality: benchLocality})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	buf := make([]byte, 1000*32)
	mem, err := in.k.objs.LtEndpoints.Memory()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		w    interface {
			WriteAt([]byte, int64) (int, error)
		}
	}{{"window", in.k.eps}, {"mapped", mem}} {
		b.Run(c.name, func(b *testing.B) {
			off := int64(0)
			for b.Loop() {
				if _, err := c.w.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(len(buf)) + 4096) % (in.k.eps.size - int64(len(buf)))
			}
		})
	}
}
