// Package charts holds loctree's Helm chart (charts/loctree). Its tests
// render the chart with Helm's own Go packages and compare the result with
// the kustomize build of istio/.
package charts
