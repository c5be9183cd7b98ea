package host

import (
	"crypto/rand"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// WASI as Envoy answers it (cpp-host src/exports.cc:650-1299): not a file
// system, no arguments or environment, stdout and stderr as log lines. Each
// function is linked under both "wasi_snapshot_preview1" and
// "wasi_unstable" (cpp-host src/wasm.cc:131-134, FOR_ALL_WASI_FUNCTIONS in
// include/proxy-wasm/exports.h:202).

// wasiModules are the import modules every WASI function is linked under.
var wasiModules = []string{"wasi_snapshot_preview1", "wasi_unstable"}

// WASI errno values (wasi_snapshot_preview1 witx).
const (
	errnoSuccess = 0
	errnoBadF    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNoEnt   = 44
	errnoNoSys   = 52
	errnoNotSup  = 58
	errnoNotDir  = 20
)

// maxRandomGet is PROXY_WASM_HOST_WASI_RANDOM_GET_MAX_SIZE_BYTES
// (cpp-host include/proxy-wasm/limits.h).
const maxRandomGet = 64 << 10

// wasi returns the WASI functions under module.
func wasi(module string) []hostFunc {
	fs := wasiFunctions()
	for i := range fs {
		fs[i].module = module
	}
	return fs
}

// errno declares a WASI function that returns an errno.
func errno(name string, fn func(vm *VM, st []uint64) uint32, ref string, params ...param) hostFunc {
	return hostFunc{name: name, params: params, results: []api.ValueType{api.ValueTypeI32},
		call: func(vm *VM, st []uint64) { st[0] = uint64(fn(vm, st)) }, ref: ref}
}

// constErrno declares a WASI function that always answers e.
func constErrno(name string, e uint32, ref string, params ...param) hostFunc {
	return errno(name, func(*VM, []uint64) uint32 { return e }, ref, params...)
}

// stdio answers e for stdout and stderr, EBADF for any other descriptor.
func stdio(name string, e uint32, ref string, params ...param) hostFunc {
	return errno(name, func(_ *VM, st []uint64) uint32 { return stdioErrno(st[0], e) }, ref, params...)
}

func stdioErrno(fd uint64, e uint32) uint32 {
	if fd != 1 && fd != 2 {
		return errnoBadF
	}
	return e
}

func wasiFunctions() []hostFunc {
	return append(wasiFiles(), wasiProcess()...)
}

func wasiFiles() []hostFunc {
	fd, iovs, iovsLen := i32("fd"), i32("iovs"), i32("iovs_len")
	return []hostFunc{
		errno("fd_write", wasiFdWrite, "exports.cc:730", fd, iovs, iovsLen, i32("result.nwritten")),
		constErrno("fd_read", errnoNoSys, "exports.cc:746", fd, iovs, iovsLen, i32("result.nread")),
		errno("fd_seek", wasiLogged("wasi_unstable fd_seek"), "exports.cc:753", fd, i64("offset"), i32("whence"), i32("result.newoffset")),
		errno("fd_close", wasiLogged("wasi_unstable fd_close"), "exports.cc:761", fd),
		errno("fd_fdstat_get", wasiFdstatGet, "exports.cc:776", fd, i32("result.stat")),
		constErrno("fd_fdstat_set_flags", errnoNoSys, "exports.cc:796", fd, i32("flags")),
		stdio("fd_fdstat_set_rights", errnoSuccess, "exports.cc:954", fd, i64("fs_rights_base"), i64("fs_rights_inheriting")),
		constErrno("fd_advise", errnoSuccess, "exports.cc:913", fd, i64("offset"), i64("len"), i32("advice")),
		stdio("fd_allocate", errnoSuccess, "exports.cc:924", fd, i64("offset"), i64("len")),
		stdio("fd_datasync", errnoSuccess, "exports.cc:938", fd),
		stdio("fd_filestat_set_size", errnoSuccess, "exports.cc:970", fd, i64("size")),
		stdio("fd_filestat_set_times", errnoSuccess, "exports.cc:986", fd, i64("atim"), i64("mtim"), i32("fst_flags")),
		constErrno("fd_pread", errnoNoSys, "exports.cc:1002", fd, iovs, iovsLen, i64("offset"), i32("result.nread")),
		errno("fd_pwrite", wasiFdPwrite, "exports.cc:1014", fd, iovs, iovsLen, i64("offset"), i32("result.nwritten")),
		errno("fd_readdir", wasiZeroThen(4, errnoNotDir), "exports.cc:1042", fd, i32("buf"), i32("buf_len"), i64("cookie"), i32("result.bufused")),
		errno("fd_renumber", wasiFdRenumber, "exports.cc:1059", fd, i32("to")),
		stdio("fd_sync", errnoSuccess, "exports.cc:1074", fd),
		errno("fd_tell", wasiFdTell, "exports.cc:1089", fd, i32("result.offset")),
		constErrno("fd_prestat_get", errnoBadF, "exports.cc:663", fd, i32("result.prestat")),
		constErrno("fd_prestat_dir_name", errnoNoSys, "exports.cc:668", fd, i32("path"), i32("path_len")),
		constErrno("fd_filestat_get", errnoBadF, "exports.cc:673", fd, i32("result.buf")),
		constErrno("path_open", errnoNoEnt, "exports.cc:655", fd, i32("dirflags"), i32("path"), i32("path_len"), i32("oflags"),
			i64("fs_rights_base"), i64("fs_rights_inheriting"), i32("fdflags"), i32("result.opened_fd")),
		constErrno("path_filestat_get", errnoNotSup, "exports.cc:770", fd, i32("flags"), i32("path"), i32("path_len"), i32("result.buf")),
		constErrno("path_create_directory", errnoNotSup, "exports.cc:1109", fd, i32("path"), i32("path_len")),
		constErrno("path_filestat_set_times", errnoNotSup, "exports.cc:1118", fd, i32("flags"), i32("path"), i32("path_len"),
			i64("atim"), i64("mtim"), i32("fst_flags")),
		constErrno("path_link", errnoNotSup, "exports.cc:1128", i32("old_fd"), i32("old_flags"), i32("old_path"), i32("old_path_len"),
			i32("new_fd"), i32("new_path")),
		errno("path_readlink", wasiZeroThen(5, errnoNotSup), "exports.cc:1138", fd, i32("path"), i32("path_len"), i32("buf"), i32("buf_len"), i32("result.bufused")),
		constErrno("path_remove_directory", errnoNotSup, "exports.cc:1154", fd, i32("path"), i32("path_len")),
		constErrno("path_rename", errnoNotSup, "exports.cc:1163", fd, i32("old_path"), i32("old_path_len"), i32("new_fd"), i32("new_path"), i32("new_path_len")),
		constErrno("path_symlink", errnoNotSup, "exports.cc:1172", i32("old_path"), i32("old_path_len"), fd, i32("new_path")),
		constErrno("path_unlink_file", errnoNotSup, "exports.cc:1180", fd, i32("path"), i32("path_len")),
		errno("sock_accept", wasiZeroThen(2, errnoNotSup), "exports.cc:1188", fd, i32("flags"), i32("result.fd")),
		errno("sock_recv", wasiSockRecv, "exports.cc:1204", fd, i32("ri_data"), i32("ri_data_len"), i32("ri_flags"), i32("result.ro_datalen"), i32("result.ro_flags")),
		errno("sock_send", wasiZeroThen(4, errnoNotSup), "exports.cc:1226", fd, i32("si_data"), i32("si_data_len"), i32("si_flags"), i32("result.so_datalen")),
		constErrno("sock_shutdown", errnoNotSup, "exports.cc:1242", fd, i32("how")),
	}
}

func wasiProcess() []hostFunc {
	return []hostFunc{
		errno("environ_get", wasiNothing, "exports.cc:803", i32("environ"), i32("environ_buf")),
		errno("environ_sizes_get", wasiZeroSizes, "exports.cc:830", i32("result.environc"), i32("result.environv_buf_size")),
		errno("args_get", wasiNothing, "exports.cc:849", i32("argv"), i32("argv_buf")),
		errno("args_sizes_get", wasiZeroSizes, "exports.cc:854", i32("result.argc"), i32("result.argv_buf_size")),
		errno("clock_time_get", wasiClockTimeGet, "exports.cc:866", i32("id"), i64("precision"), i32("result.timestamp")),
		errno("clock_res_get", wasiClockResGet, "exports.cc:889", i32("id"), i32("result.resolution")),
		errno("random_get", wasiRandomGet, "exports.cc:1250", i32("buf"), i32("buf_len")),
		constErrno("sched_yield", errnoSuccess, "exports.cc:1267"),
		errno("poll_oneoff", wasiZeroThen(3, errnoSuccess), "exports.cc:1276", i32("in"), i32("out"), i32("nsubscriptions"), i32("result.nevents")),
		{name: "proc_exit", params: []param{i32("rval")}, call: wasiProcExit, ref: "exports.cc:1292"},
	}
}

// wasiLogged logs msg and answers success, as Envoy's fd_seek and fd_close
// do: through Context::error, which Envoy logs at trace level
// (source/extensions/common/wasm/context.cc).
func wasiLogged(msg string) func(vm *VM, st []uint64) uint32 {
	return func(vm *VM, _ []uint64) uint32 {
		vm.h.emit(LogEntry{VM: vm.id, Level: LogTrace, Message: msg})
		return errnoSuccess
	}
}

// wasiProcExit logs and returns to the module (cpp-host
// src/exports.cc:1292-1295).
func wasiProcExit(vm *VM, _ []uint64) {
	vm.h.emit(LogEntry{VM: vm.id, Level: LogTrace, Message: "wasi_unstable proc_exit"})
}

// wasiZeroThen writes a zero u32 to the result pointer in argument i and
// answers e.
func wasiZeroThen(i int, e uint32) func(vm *VM, st []uint64) uint32 {
	return func(vm *VM, st []uint64) uint32 {
		if !vm.writeU32(st[i], 0) {
			return errnoFault
		}
		return e
	}
}

func wasiNothing(*VM, []uint64) uint32 { return errnoSuccess }

func wasiZeroSizes(vm *VM, st []uint64) uint32 {
	if !vm.writeU32(st[0], 0) || !vm.writeU32(st[1], 0) {
		return errnoFault
	}
	return errnoSuccess
}

func wasiSockRecv(vm *VM, st []uint64) uint32 {
	if !vm.writeU32(st[4], 0) || !vm.mem.WriteUint16Le(uint32(st[5]), 0) {
		return errnoFault
	}
	return errnoNotSup
}

func wasiFdRenumber(_ *VM, st []uint64) uint32 {
	if stdioErrno(st[0], 0) != 0 || stdioErrno(st[1], 0) != 0 {
		return errnoBadF
	}
	return errnoNotSup
}

func wasiFdTell(vm *VM, st []uint64) uint32 {
	if e := stdioErrno(st[0], 0); e != 0 {
		return e
	}
	if !vm.writeU64(st[1], 0) {
		return errnoFault
	}
	return errnoSuccess
}

// wasiFdstatGet: stdout and stderr are writable character streams; every
// other descriptor is EBADF.
func wasiFdstatGet(vm *VM, st []uint64) uint32 {
	if e := stdioErrno(st[0], 0); e != 0 {
		return e
	}
	var stat [24]byte
	stat[8] = 64 // fs_rights_base = FD_WRITE
	if !vm.mem.Write(uint32(st[1]), stat[:]) {
		return errnoFault
	}
	return errnoSuccess
}

func wasiFdWrite(vm *VM, st []uint64) uint32 {
	n, e := vm.writev(st[0], st[1], st[2])
	if e != errnoSuccess {
		return e
	}
	if !vm.writeU32(st[3], n) {
		return errnoFault
	}
	return errnoSuccess
}

func wasiFdPwrite(vm *VM, st []uint64) uint32 {
	if e := stdioErrno(st[0], 0); e != 0 {
		return e
	}
	n, e := vm.writev(st[0], st[1], st[2])
	if e != errnoSuccess {
		return e
	}
	if !vm.writeU32(st[4], n) {
		return errnoFault
	}
	return errnoSuccess
}

// writev turns a write to stdout (info) or stderr (error) into one log
// line, without its final newline (cpp-host src/exports.cc:679-728).
func (vm *VM) writev(fd, iovs, n uint64) (uint32, uint32) {
	level := LogInfo
	switch fd {
	case 1:
	case 2:
		level = LogError
	default:
		return 0, errnoBadF
	}
	var msg []byte
	for i := range n {
		iov, ok := vm.read(iovs+8*i, 8)
		if !ok {
			return 0, errnoFault
		}
		buf, ok := vm.read(uint64(le32(iov)), uint64(le32(iov[4:])))
		if !ok {
			return 0, errnoFault
		}
		msg = append(msg, buf...)
	}
	if len(msg) > 0 {
		line := msg
		if line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		vm.h.emit(LogEntry{VM: vm.id, Level: level, Message: string(line)})
	}
	return uint32(len(msg)), errnoSuccess
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// wasiClockTimeGet: realtime and monotonic; CPU-time clocks are ENOTSUP.
func wasiClockTimeGet(vm *VM, st []uint64) uint32 {
	var t uint64
	switch st[0] {
	case 0:
		t = uint64(time.Now().UnixNano())
	case 1:
		t = uint64(time.Since(monoEpoch))
	default:
		return errnoNotSup
	}
	if !vm.writeU64(st[2], t) {
		return errnoFault
	}
	return errnoSuccess
}

var monoEpoch = time.Now()

func wasiClockResGet(vm *VM, st []uint64) uint32 {
	if st[0] > 1 {
		return errnoNotSup
	}
	if !vm.writeU64(st[1], 1) {
		return errnoFault
	}
	return errnoSuccess
}

func wasiRandomGet(vm *VM, st []uint64) uint32 {
	n := st[1]
	if n > maxRandomGet {
		return errnoInval
	}
	if n == 0 {
		return errnoSuccess
	}
	buf, ok := vm.read(st[0], n)
	if !ok {
		return errnoFault
	}
	rand.Read(buf)
	return errnoSuccess
}
