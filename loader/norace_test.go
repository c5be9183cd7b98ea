//go:build !race

package loader

const raceEnabled = false
