// Package fanout measures what a DaemonSet of loctree agents with the
// Kubernetes source costs one real API server, beside a kube-proxy-shaped
// baseline (kubeproxylike) in the same run: TestFanOut, run only when
// LOCTREE_FANOUT names the agent counts (docs/PERFORMANCE.md has the
// command and the numbers). It is a measurement, not a test CI runs.
package fanout
