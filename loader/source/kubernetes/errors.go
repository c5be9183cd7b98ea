package kubernetes

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrBadAnnotation means a loctree.io/* annotation of a Service, or a
	// Service field loctree maps (sessionAffinity), cannot be used.
	ErrBadAnnotation = errors.New("bad loctree annotation")
	// ErrUnsupportedRule means a DestinationRule sets what the tree cannot honour.
	ErrUnsupportedRule = errors.New("destination rule not honoured")
	// ErrConfig means the source's configuration is incomplete.
	ErrConfig = errors.New("bad kubernetes source configuration")
	// ErrNotSynced means the informers' caches did not sync before the context ended.
	ErrNotSynced = errors.New("kubernetes caches did not sync")
)
