package promtext

import (
	"errors"
	"strings"
	"testing"
)

// TestExactText: the lines the format wants, byte for byte, and the count
// of bytes written.
func TestExactText(t *testing.T) {
	var b strings.Builder
	p := New(&b)
	p.Metric("a_total", "counter", "As.", 3)
	p.Labeled("b", "gauge", "Bs.", "code", []Labeled{{Label: "200", V: 0.5}, {Label: `x"\`, V: 1e21}})
	const want = "# HELP a_total As.\n# TYPE a_total counter\na_total 3\n" +
		"# HELP b Bs.\n# TYPE b gauge\nb{code=\"200\"} 0.5\nb{code=\"x\\\"\\\\\"} 1000000000000000000000\n"
	n, err := p.Written()
	if b.String() != want || n != int64(len(want)) || err != nil {
		t.Fatalf("wrote %q (%d, %v), want %q (%d)", b.String(), n, err, want, len(want))
	}
}

// failAfter fails every write after the first n bytes, and counts the
// writes it sees after its first failure.
type failAfter struct{ n, late int }

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n < 0 {
		f.late++
	}
	if len(b) > f.n {
		f.n = -1
		return 0, errors.New("full")
	}
	f.n -= len(b)
	return len(b), nil
}

// TestFirstErrorKept: after a failed write nothing more is written, by
// Printf or by Write, and the first error is the one reported.
func TestFirstErrorKept(t *testing.T) {
	f := &failAfter{n: 10}
	p := New(f)
	p.Printf("0123456789")
	p.Printf("x")
	p.Metric("m", "gauge", "M.", 1)
	if _, err := p.Write([]byte("y")); err == nil {
		t.Fatal("Write after a failed write: no error")
	}
	if n, err := p.Written(); n != 10 || err == nil || err.Error() != "full" || f.late != 0 {
		t.Fatalf("written %d, %v, %d writes after the failure; want 10, the first error, none", n, err, f.late)
	}
}
