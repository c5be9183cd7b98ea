package host

import "errors"

// Errors returned by the host. They are wrapped with context; test them with
// errors.Is.
var (
	// ErrABIVersion: the module exports no supported proxy_abi_version_* marker.
	ErrABIVersion = errors.New("unsupported proxy-wasm ABI version")
	// ErrMissingImport: the module imports a function the host does not
	// offer for its ABI version (Envoy refuses to load such a module).
	ErrMissingImport = errors.New("failed to load wasm module due to a missing import")
	// ErrImportType: the module imports a host function with another signature.
	ErrImportType = errors.New("failed to load wasm module due to an import type mismatch")
	// ErrRestricted: the module called a host function that is not allowed
	// in the phase it ran in (start, or its allocator).
	ErrRestricted = errors.New("restricted host call")
	// ErrExportSignature: a module export the host calls has the wrong signature.
	ErrExportSignature = errors.New("bad function signature")
	// ErrMissingExport: the module lacks a function the host needs.
	ErrMissingExport = errors.New("module is missing an export")
	// ErrVMStart: proxy_on_vm_start returned false.
	ErrVMStart = errors.New("proxy_on_vm_start failed")
	// ErrPluginStart: proxy_on_configure returned false (bad plugin configuration).
	ErrPluginStart = errors.New("plugin start failed (proxy_on_configure returned false)")
	// ErrVMBroken: the VM trapped or timed out earlier and must be replaced.
	ErrVMBroken = errors.New("wasm VM is broken")
	// ErrTrap: the module trapped or exceeded its time limit during a callback.
	ErrTrap = errors.New("wasm module trapped")
	// ErrStreamDone: the stream was already closed.
	ErrStreamDone = errors.New("stream already closed")
	// ErrUnknownUpstream: a proxy_http_call named an upstream the host does not know.
	ErrUnknownUpstream = errors.New("unknown upstream")
)
