//go:build !unix

package main

// cpuTime is -1 where the process's CPU time is not known.
func cpuTime() int64 { return -1 }
