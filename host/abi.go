package host

import "fmt"

// Status is a proxy_status_t.
type Status uint32

// proxy_status_t values (ABI 0.2.1).
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
	bufferHTTPRequestBody      = 0
	bufferHTTPResponseBody     = 1
	bufferDownstreamData       = 2
	bufferUpstreamData         = 3
	bufferHTTPCallResponseBody = 4
	bufferGRPCReceive          = 5
	bufferVMConfiguration      = 6
	bufferPluginConfiguration  = 7
	bufferForeignArguments     = 8
)

// proxy_map_type_t values.
const (
	mapRequestHeaders       = 0
	mapRequestTrailers      = 1
	mapResponseHeaders      = 2
	mapResponseTrailers     = 3
	mapGRPCInitialMetadata  = 4
	mapGRPCTrailingMetadata = 5
	mapHTTPCallHeaders      = 6
	mapHTTPCallTrailers     = 7
)

// proxy_stream_type_t values.
const (
	streamRequest  = 0
	streamResponse = 1
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

// ParseLogLevel parses a level name as Envoy's --log-level takes it
// (trace, debug, info, warn or warning, error, critical).
func ParseLogLevel(s string) (LogLevel, error) {
	for l := LogTrace; l <= LogCritical; l++ {
		if s == l.String() {
			return l, nil
		}
	}
	if s == "warning" {
		return LogWarn, nil
	}
	return 0, fmt.Errorf("log level %q: want trace, debug, info, warn, error or critical", s)
}

// String names the level as Envoy's log does.
func (l LogLevel) String() string {
	switch l {
	case LogTrace:
		return "trace"
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	case LogCritical:
		return "critical"
	}
	return "unknown"
}
