// Package promtext writes the Prometheus text exposition format (version
// 0.0.4): HELP and TYPE lines and samples, the first write error kept and
// every later write skipped, the bytes counted. The agent's /metrics and
// its sources' own metrics (the xDS source's) write through it.
package promtext

import (
	"fmt"
	"io"
	"strconv"
)

// Writer writes metrics to an io.Writer; see the package documentation.
// It is an io.Writer itself, so a part of the page written elsewhere
// counts and stops at the first error too.
type Writer struct {
	w   io.Writer
	n   int64
	err error
}

// New returns a Writer to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Written is the bytes written and the first error.
func (p *Writer) Written() (int64, error) { return p.n, p.err }

// Write writes b unless an earlier write failed.
func (p *Writer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.err = err
	return n, err
}

// Printf writes a formatted line (or lines) unless an earlier write failed.
func (p *Writer) Printf(format string, args ...any) {
	if p.err != nil {
		return
	}
	n, err := fmt.Fprintf(p.w, format, args...)
	p.n += int64(n)
	p.err = err
}

// Head writes a metric's HELP and TYPE lines.
func (p *Writer) Head(name, typ, help string) {
	p.Printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// Metric writes a metric of one unlabelled sample.
func (p *Writer) Metric(name, typ, help string, v float64) {
	p.Head(name, typ, help)
	p.Printf("%s %s\n", name, Float(v))
}

// Labeled is one sample of a metric with one label: the label's value and
// the sample's.
type Labeled struct {
	Label string
	V     float64
}

// Labeled writes a metric with one sample per value of the label key.
// Label values are quoted as Go quotes them, which is the format's escaping
// for the printable UTF-8 they are (backslash, double quote).
func (p *Writer) Labeled(name, typ, help, key string, vs []Labeled) {
	p.Head(name, typ, help)
	for _, v := range vs {
		p.Printf("%s{%s=%q} %s\n", name, key, v.Label, Float(v.V))
	}
}

// Float is v as the format writes a sample value.
func Float(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
