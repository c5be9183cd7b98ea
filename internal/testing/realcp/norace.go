//go:build !race

package realcp

// raceEnabled: built with -race (testing.go).
const raceEnabled = false
