//go:build !race

package dist

// raceEnabled: the race detector slows byte-level loops about tenfold; heavy tests shrink.
const raceEnabled = false
