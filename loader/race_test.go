//go:build race

package loader

// raceEnabled: the race detector slows the scale test ~10×; it runs smaller.
const raceEnabled = true
