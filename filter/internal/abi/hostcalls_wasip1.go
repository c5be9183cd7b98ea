//go:build wasip1

package abi

import (
	"strconv"
	"unsafe"

	pw "github.com/loctree/loctree/internal/proxywasm"
)

const (
	mapRequestHeaders  = pw.MapRequestHeaders
	mapHTTPCallHeaders = pw.MapHTTPCallHeaders
	bufferHTTPCallBody = pw.BufferHTTPCallResponseBody
	bufferPluginConfig = pw.BufferPluginConfiguration
	metricCounter      = uint32(pw.MetricCounter)
	metricGauge        = uint32(pw.MetricGauge)
	levelDebug         = uint32(pw.LogDebug)
	levelInfo          = uint32(pw.LogInfo)
	levelWarn          = uint32(pw.LogWarn)
	levelError         = uint32(pw.LogError)
	levelCritical      = uint32(pw.LogCritical)
)

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func sptr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// Return slots of hostcalls. The module is single-threaded; globals keep
// them off the heap.
var retData, retSize, retU32 uint32
var retU64 uint64

var (
	pData = unsafe.Pointer(&retData)
	pSize = unsafe.Pointer(&retSize)
	pU32  = unsafe.Pointer(&retU32)
	pU64  = unsafe.Pointer(&retU64)
)

// take wraps the returned buffer in a Go slice and releases the allocation
// list (the slice now keeps the buffer alive).
func take(st uint32) ([]byte, error) {
	transient = false
	p, n := retData, retSize
	retData, retSize = 0, 0
	if len(allocs) > 0 {
		clear(allocs)
		allocs = allocs[:0]
	}
	if err := Status(st).Err(); err != nil {
		return nil, err
	}
	if n == 0 || p == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), p)), n), nil
}

// pathBuf holds the NUL-joined property path of the current call.
var pathBuf []byte

func joinPath(path []string) []byte {
	pathBuf = pathBuf[:0]
	for i, s := range path {
		if i > 0 {
			pathBuf = append(pathBuf, 0)
		}
		pathBuf = append(pathBuf, s...)
	}
	return pathBuf
}

// GetPluginConfiguration returns the plugin configuration buffer.
func GetPluginConfiguration() ([]byte, error) {
	return take(proxyGetBufferBytes(bufferPluginConfig, 0, 1<<31-1, pData, pSize))
}

// GetProperty returns the property at path (segments joined by NUL). The
// result is valid until the current callback returns; copy it to keep it.
func GetProperty(path []string) ([]byte, error) {
	p := joinPath(path)
	transient = true
	return take(proxyGetProperty(ptr(p), uint32(len(p)), pData, pSize))
}

// GetPropertyString is GetProperty as a string, with the same lifetime.
func GetPropertyString(path []string) (string, error) {
	b, err := GetProperty(path)
	return unsafe.String(unsafe.SliceData(b), len(b)), err
}

// GetHttpRequestHeader returns the value of a request header. The result
// is valid until the current callback returns; copy it to keep it.
func GetHttpRequestHeader(key string) (string, error) {
	transient = true
	b, err := take(proxyGetHeaderMapValue(mapRequestHeaders, sptr(key), uint32(len(key)), pData, pSize))
	return unsafe.String(unsafe.SliceData(b), len(b)), err
}

// ReplaceHttpRequestHeader sets a request header, replacing every value.
func ReplaceHttpRequestHeader(key, value string) error {
	return Status(proxyReplaceHeaderMapValue(mapRequestHeaders, sptr(key), uint32(len(key)), sptr(value), uint32(len(value)))).Err()
}

// RemoveHttpRequestHeader removes a request header.
func RemoveHttpRequestHeader(key string) error {
	return Status(proxyRemoveHeaderMapValue(mapRequestHeaders, sptr(key), uint32(len(key)))).Err()
}

// SendHttpResponse sends a local response (applied by the host when the
// current callback returns).
func SendHttpResponse(status uint32, headers [][2]string, body []byte, grpcStatus int32) error {
	h := EncodePairs(headers)
	return Status(proxySendLocalResponse(status, nil, 0, ptr(body), uint32(len(body)), ptr(h), uint32(len(h)), grpcStatus)).Err()
}

// DispatchHttpCall sends an HTTP request to the named upstream cluster; cb
// runs in proxy_on_http_call_response (numHeaders == 0 means failure).
func DispatchHttpCall(cluster string, headers [][2]string, body []byte, trailers [][2]string,
	timeoutMillisecond uint32, cb func(numHeaders, bodySize, numTrailers int)) (uint32, error) {
	h, t := EncodePairs(headers), EncodePairs(trailers)
	st := Status(proxyHTTPCall(sptr(cluster), uint32(len(cluster)), ptr(h), uint32(len(h)), ptr(body), uint32(len(body)),
		ptr(t), uint32(len(t)), timeoutMillisecond, pU32))
	if err := st.Err(); err != nil {
		return 0, err
	}
	id := retU32
	state.callouts[id] = callout{ctx: state.active, cb: cb}
	return id, nil
}

// GetHttpCallResponseHeaders returns the HTTP call response's headers.
func GetHttpCallResponseHeaders() ([][2]string, error) {
	b, err := take(proxyGetHeaderMapPairs(mapHTTPCallHeaders, pData, pSize))
	if err != nil {
		return nil, err
	}
	return DecodePairs(b)
}

// GetHttpCallResponseBody returns up to maxSize bytes of the HTTP call
// response's body from start.
func GetHttpCallResponseBody(start, maxSize int) ([]byte, error) {
	return take(proxyGetBufferBytes(bufferHTTPCallBody, uint32(start), uint32(maxSize), pData, pSize))
}

// GetSharedData returns the shared value of key and its CAS token.
func GetSharedData(key string) ([]byte, uint32, error) {
	retU32 = 0
	b, err := take(proxyGetSharedData(sptr(key), uint32(len(key)), pData, pSize, pU32))
	return b, retU32, err
}

// SetSharedData stores a shared value; a non-zero cas must be current.
func SetSharedData(key string, data []byte, cas uint32) error {
	return Status(proxySetSharedData(sptr(key), uint32(len(key)), ptr(data), uint32(len(data)), cas)).Err()
}

// SetTickPeriodMilliSeconds sets the root context's tick period.
func SetTickPeriodMilliSeconds(ms uint32) error { return Status(proxySetTickPeriod(ms)).Err() }

// Counter is a counter metric.
type Counter uint32

// Gauge is a gauge metric.
type Gauge uint32

func define(typ uint32, name string) uint32 {
	if st := Status(proxyDefineMetric(typ, sptr(name), uint32(len(name)), pU32)); st != 0 {
		panic("define metric " + strconv.Quote(name) + ": " + st.Err().Error())
	}
	return retU32
}

// DefineCounterMetric defines (or finds) a counter.
func DefineCounterMetric(name string) Counter { return Counter(define(metricCounter, name)) }

// DefineGaugeMetric defines (or finds) a gauge.
func DefineGaugeMetric(name string) Gauge { return Gauge(define(metricGauge, name)) }

// Increment adds offset to the counter.
func (c Counter) Increment(offset uint64) { proxyIncrementMetric(uint32(c), int64(offset)) }

// Value returns the counter's value.
func (c Counter) Value() uint64 {
	proxyGetMetric(uint32(c), pU64)
	return retU64
}

// Add adds offset to the gauge.
func (g Gauge) Add(offset int64) { proxyIncrementMetric(uint32(g), offset) }

// Value returns the gauge's value.
func (g Gauge) Value() int64 {
	proxyGetMetric(uint32(g), pU64)
	return int64(retU64)
}

func logAt(level uint32, msg string) { proxyLog(level, sptr(msg), uint32(len(msg))) }

// LogDebug logs at debug level.
func LogDebug(msg string) { logAt(levelDebug, msg) }

// LogInfo logs at info level.
func LogInfo(msg string) { logAt(levelInfo, msg) }

// LogWarn logs at warn level.
func LogWarn(msg string) { logAt(levelWarn, msg) }

// LogError logs at error level.
func LogError(msg string) { logAt(levelError, msg) }

// LogCritical logs at critical level.
func LogCritical(msg string) { logAt(levelCritical, msg) }

// SetGauge sets a gauge to v (proxy_record_metric).
func SetGauge(g Gauge, v int64) { proxyRecordMetric(uint32(g), uint64(v)) }
