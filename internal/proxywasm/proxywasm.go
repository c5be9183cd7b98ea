// Package proxywasm is the vocabulary of the proxy-wasm ABI that both sides
// of it use here: the host (host/) and the filter's ABI layer
// (filter/internal/abi). Values are those of the spec
// (github.com/proxy-wasm/spec, abi-versions/v0.2.1) and of cpp-host's
// include/proxy-wasm/context_interface.h and wasm.h. The serialized
// header-map format is internal/pairs. It uses the standard library only.
package proxywasm

import (
	"errors"
	"strconv"
)

// Status is a proxy_status_t (cpp-host WasmResult).
type Status uint32

// proxy_status_t values.
const (
	StatusOK                   Status = 0
	StatusNotFound             Status = 1
	StatusBadArgument          Status = 2
	StatusSerializationFailure Status = 3
	StatusParseFailure         Status = 4
	StatusInvalidMemoryAccess  Status = 6
	StatusEmpty                Status = 7
	StatusCASMismatch          Status = 8
	StatusInternalFailure      Status = 10
	StatusUnimplemented        Status = 12
)

// Action is a proxy_action_t returned by the HTTP callbacks.
type Action uint32

// proxy_action_t values.
const (
	ActionContinue Action = 0
	ActionPause    Action = 1
)

// String returns "continue" or "pause".
func (a Action) String() string {
	if a == ActionPause {
		return "pause"
	}
	return "continue"
}

// proxy_buffer_type_t values.
const (
	BufferHTTPRequestBody      = 0
	BufferHTTPResponseBody     = 1
	BufferDownstreamData       = 2
	BufferUpstreamData         = 3
	BufferHTTPCallResponseBody = 4
	BufferGRPCReceive          = 5
	BufferVMConfiguration      = 6
	BufferPluginConfiguration  = 7
	BufferForeignArguments     = 8
)

// proxy_map_type_t values.
const (
	MapRequestHeaders       = 0
	MapRequestTrailers      = 1
	MapResponseHeaders      = 2
	MapResponseTrailers     = 3
	MapGRPCInitialMetadata  = 4
	MapGRPCTrailingMetadata = 5
	MapHTTPCallHeaders      = 6
	MapHTTPCallTrailers     = 7
)

// proxy_stream_type_t values.
const (
	StreamRequest    = 0
	StreamResponse   = 1
	StreamDownstream = 2
	StreamUpstream   = 3
)

// MetricType is a proxy_metric_type_t.
type MetricType uint32

// proxy_metric_type_t values.
const (
	MetricCounter   MetricType = 0
	MetricGauge     MetricType = 1
	MetricHistogram MetricType = 2
)

// String names the metric type.
func (t MetricType) String() string {
	switch t {
	case MetricCounter:
		return "counter"
	case MetricGauge:
		return "gauge"
	case MetricHistogram:
		return "histogram"
	}
	return "unknown"
}

// LogLevel is a proxy_log_level_t.
type LogLevel uint32

// proxy_log_level_t values.
const (
	LogTrace    LogLevel = 0
	LogDebug    LogLevel = 1
	LogInfo     LogLevel = 2
	LogWarn     LogLevel = 3
	LogError    LogLevel = 4
	LogCritical LogLevel = 5
)

var levelNames = [...]string{"trace", "debug", "info", "warn", "error", "critical"}

// String names the level as Envoy's log does.
func (l LogLevel) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "unknown"
}

// ParseLogLevel parses a level name as Envoy's --log-level takes it
// (trace, debug, info, warn or warning, error, critical).
func ParseLogLevel(s string) (LogLevel, error) {
	for l := range levelNames {
		if s == levelNames[l] {
			return LogLevel(l), nil
		}
	}
	if s == "warning" {
		return LogWarn, nil
	}
	// Not fmt: the filter's ABI layer imports this package, and fmt would
	// add to every VM's memory (docs/WASM.md, "Memory at mesh scale").
	return 0, errors.New("log level " + strconv.Quote(s) + ": want trace, debug, info, warn, error or critical")
}
