//go:build unix

package httpserve

import "syscall"

// capToFiles lowers n to half the soft open-file limit (at least 1).
func capToFiles(n int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return n
	}
	return int(max(1, min(uint64(n), lim.Cur/2)))
}
