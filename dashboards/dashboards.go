// Package dashboards holds loctree's Grafana dashboards (loctree.json: the
// agent's and the filter's Prometheus metrics). Its test checks that every
// metric a dashboard queries is exported under that name.
package dashboards

import _ "embed"

// Loctree is the Grafana dashboard JSON (import it, or mount it into a
// dashboard provisioning directory).
//
//go:embed loctree.json
var Loctree []byte
