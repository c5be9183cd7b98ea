package shared

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrInvalidTopology is wrapped by every Build validation error.
	ErrInvalidTopology = errors.New("invalid topology")
	// ErrCorrupt is wrapped by every Decode error: the blob is truncated, has a
	// bad checksum, or holds records that break the format's invariants.
	ErrCorrupt = errors.New("corrupt tree")
	// ErrLabelCollision means two different scope values hash to the same label.
	ErrLabelCollision = errors.New("label hash collision")
	// ErrTooLarge means a topology exceeds the format's limits.
	ErrTooLarge = errors.New("topology too large")
	// ErrNoCandidate means a lookup found no endpoint (strict mode with no
	// full match, or no eligible endpoint at all).
	ErrNoCandidate = errors.New("no candidate endpoint")
	// ErrUnknownService means no service has the requested name or host.
	ErrUnknownService = errors.New("unknown service")
	// ErrUnknownEndpoint means a balancer does not hold the address.
	ErrUnknownEndpoint = errors.New("unknown endpoint")
	// ErrDuplicateEndpoint means a balancer already holds the address.
	ErrDuplicateEndpoint = errors.New("duplicate endpoint")
)
