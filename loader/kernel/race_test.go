//go:build race

package kernel

// raceEnabled: the race detector slows the scale test ~10×; it runs smaller.
const raceEnabled = true
