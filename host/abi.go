package host

import "github.com/loctree/loctree/internal/proxywasm"

// The proxy-wasm vocabulary of the host's API; the values live in
// internal/proxywasm, shared with the filter's ABI layer.
type (
	// Status is a proxy_status_t.
	Status = proxywasm.Status
	// Action is a proxy_action_t returned by the HTTP callbacks.
	Action = proxywasm.Action
	// MetricType is a proxy_metric_type_t.
	MetricType = proxywasm.MetricType
	// LogLevel is a proxy_log_level_t.
	LogLevel = proxywasm.LogLevel
)

// proxy_status_t values.
const (
	StatusOK                   = proxywasm.StatusOK
	StatusNotFound             = proxywasm.StatusNotFound
	StatusBadArgument          = proxywasm.StatusBadArgument
	StatusSerializationFailure = proxywasm.StatusSerializationFailure
	StatusParseFailure         = proxywasm.StatusParseFailure
	StatusInvalidMemoryAccess  = proxywasm.StatusInvalidMemoryAccess
	StatusEmpty                = proxywasm.StatusEmpty
	StatusCASMismatch          = proxywasm.StatusCASMismatch
	StatusInternalFailure      = proxywasm.StatusInternalFailure
	StatusUnimplemented        = proxywasm.StatusUnimplemented
)

// proxy_action_t values.
const (
	ActionContinue = proxywasm.ActionContinue
	ActionPause    = proxywasm.ActionPause
)

// proxy_metric_type_t values.
const (
	MetricCounter   = proxywasm.MetricCounter
	MetricGauge     = proxywasm.MetricGauge
	MetricHistogram = proxywasm.MetricHistogram
)

// proxy_log_level_t values.
const (
	LogTrace    = proxywasm.LogTrace
	LogDebug    = proxywasm.LogDebug
	LogInfo     = proxywasm.LogInfo
	LogWarn     = proxywasm.LogWarn
	LogError    = proxywasm.LogError
	LogCritical = proxywasm.LogCritical
)

// ParseLogLevel parses a level name as Envoy's --log-level takes it.
func ParseLogLevel(s string) (LogLevel, error) { return proxywasm.ParseLogLevel(s) }

// Buffer, map and stream types, by their ABI names.
const (
	bufferHTTPRequestBody      = proxywasm.BufferHTTPRequestBody
	bufferHTTPResponseBody     = proxywasm.BufferHTTPResponseBody
	bufferDownstreamData       = proxywasm.BufferDownstreamData
	bufferUpstreamData         = proxywasm.BufferUpstreamData
	bufferHTTPCallResponseBody = proxywasm.BufferHTTPCallResponseBody
	bufferGRPCReceive          = proxywasm.BufferGRPCReceive
	bufferVMConfiguration      = proxywasm.BufferVMConfiguration
	bufferPluginConfiguration  = proxywasm.BufferPluginConfiguration
	bufferForeignArguments     = proxywasm.BufferForeignArguments

	mapRequestHeaders   = proxywasm.MapRequestHeaders
	mapRequestTrailers  = proxywasm.MapRequestTrailers
	mapResponseHeaders  = proxywasm.MapResponseHeaders
	mapResponseTrailers = proxywasm.MapResponseTrailers
	mapHTTPCallHeaders  = proxywasm.MapHTTPCallHeaders
	mapHTTPCallTrailers = proxywasm.MapHTTPCallTrailers

	streamRequest    = proxywasm.StreamRequest
	streamResponse   = proxywasm.StreamResponse
	streamDownstream = proxywasm.StreamDownstream
	streamUpstream   = proxywasm.StreamUpstream
)
