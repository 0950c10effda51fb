//go:build race

package comm

// raceEnabled: the race detector slows byte-level loops about tenfold; heavy tests shrink.
const raceEnabled = true
