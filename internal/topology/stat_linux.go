//go:build linux

package topology

import (
	"os"
	"syscall"
)

// sysStat adds the change time, inode and device: a file replaced by a
// rename has another inode even when its size and times are the same.
func sysStat(fi os.FileInfo, sig *fileSig) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		sig.ctime = st.Ctim.Nano()
		sig.ino, sig.dev = uint64(st.Ino), uint64(st.Dev)
	}
}
