//go:build !race

package gateway

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
