package host

// The host functions a module may call while it starts and while its
// allocator runs; any other call traps (cpp-host src/v8/v8.cc:568-569,
// "restricted_callback").

// startAllowed is cpp-host's allow-list for `_initialize`, `main`,
// `__main_void` and `_start` (src/wasm.cc:381-440, WasmBase::startVm).
var startAllowed = allowList([]string{"env.emscripten_notify_memory_growth", "env.proxy_log"},
	"fd_write", "args_sizes_get", "args_get", "environ_sizes_get", "environ_get",
	"clock_time_get", "clock_res_get", "random_get", "poll_oneoff", "fd_fdstat_get", "fd_fdstat_set_flags",
	"fd_advise", "fd_allocate", "fd_datasync", "fd_fdstat_set_rights", "fd_filestat_get",
	"fd_filestat_set_size", "fd_filestat_set_times", "fd_pread", "fd_prestat_dir_name", "fd_prestat_get",
	"fd_pwrite", "fd_readdir", "fd_renumber", "fd_sync", "fd_tell", "path_create_directory",
	"path_filestat_get", "path_filestat_set_times", "path_link", "path_readlink", "path_remove_directory",
	"path_rename", "path_symlink", "path_unlink_file", "sock_accept", "sock_recv", "sock_send", "sock_shutdown")

// allocAllowed is cpp-host's allow-list for the allocator
// (include/proxy-wasm/wasm.h:397-405, WasmBase::allocMemory).
var allocAllowed = allowList([]string{"env.proxy_log"}, "fd_write", "clock_time_get", "poll_oneoff")

// allowList is the qualified names env plus each WASI name under both
// WASI modules.
func allowList(env []string, wasiNames ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range env {
		m[n] = true
	}
	for _, n := range wasiNames {
		for _, mod := range wasiModules {
			m[mod+"."+n] = true
		}
	}
	return m
}

// restrict limits the host functions callable to allowed while phase runs;
// the returned func restores the previous limit.
func (vm *VM) restrict(phase string, allowed map[string]bool) func() {
	prevAllowed, prevPhase := vm.allowed, vm.phase
	vm.allowed, vm.phase = allowed, phase
	return func() { vm.allowed, vm.phase = prevAllowed, prevPhase }
}
