// Package pidstamp names what a process leaves on the machine (mounts,
// cgroups, temporary directories) after its pid, so that a later process
// can tell what a killed one left: the things whose process is gone. The
// test kit (internal/testing/kerneltest) and `loctree demo` sweep with it.
package pidstamp

import (
	"os"
	"strconv"
	"strings"
)

// Prefix is the name prefix of something kind made by process pid:
// "<kind>-<pid>-" (a random suffix follows, as os.MkdirTemp adds).
func Prefix(kind string, pid int) string { return kind + "-" + strconv.Itoa(pid) + "-" }

// Parse returns the pid of a name made with Prefix(kind, pid) (or exactly
// "<kind>-<pid>"), and false for any other name.
func Parse(kind, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, kind+"-")
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != digits {
		return 0, false
	}
	return pid, true
}

// Gone reports whether no process has pid, or a zombie has it: a killed
// process whose parent was killed with it may wait a while to be reaped.
// A pid that runs again (reused) is not gone: what it names is left alone,
// a leak rather than a removal from under a live process.
func Gone(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if os.IsNotExist(err) {
		return true
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return err == nil && i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
}
