//go:build !wasip1

package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
)

// Counter is a counter metric.
type Counter = proxywasm.MetricCounter

// Gauge is a gauge metric.
type Gauge = proxywasm.MetricGauge

// The host functions the filter uses.
var (
	SetVMContext               = proxywasm.SetVMContext
	GetPluginConfiguration     = proxywasm.GetPluginConfiguration
	GetProperty                = proxywasm.GetProperty
	GetHttpRequestHeader       = proxywasm.GetHttpRequestHeader
	ReplaceHttpRequestHeader   = proxywasm.ReplaceHttpRequestHeader
	RemoveHttpRequestHeader    = proxywasm.RemoveHttpRequestHeader
	SendHttpResponse           = proxywasm.SendHttpResponse
	DispatchHttpCall           = proxywasm.DispatchHttpCall
	GetHttpCallResponseHeaders = proxywasm.GetHttpCallResponseHeaders
	GetHttpCallResponseBody    = proxywasm.GetHttpCallResponseBody
	GetSharedData              = proxywasm.GetSharedData
	SetSharedData              = proxywasm.SetSharedData
	SetTickPeriodMilliSeconds  = proxywasm.SetTickPeriodMilliSeconds
	DefineCounterMetric        = proxywasm.DefineCounterMetric
	DefineGaugeMetric          = proxywasm.DefineGaugeMetric
	LogDebug                   = proxywasm.LogDebug
	LogInfo                    = proxywasm.LogInfo
	LogWarn                    = proxywasm.LogWarn
	LogError                   = proxywasm.LogError
	LogCritical                = proxywasm.LogCritical
)

// SetGauge sets a gauge to v (the SDK has no record call for gauges).
func SetGauge(g Gauge, v int64) { g.Add(v - g.Value()) }

// GetPropertyString is GetProperty as a string.
func GetPropertyString(path []string) (string, error) {
	b, err := proxywasm.GetProperty(path)
	return string(b), err
}
