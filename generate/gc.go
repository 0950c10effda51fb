package generate

import (
	"os"
	"runtime/debug"
)

// heldHeadroom is about how much garbage the collector lets accumulate while a process
// holds its weights (collectorHeadroom).
const heldHeadroom = 512 << 20

// collectorHeadroom bounds the garbage the collector lets accumulate while a process holds
// weights of w bytes. Go collects once the heap has grown by GOGC percent (default 100) of
// what was live after the last collection; with the weights live that allowance is the
// weights' size again, and the steps' and the decode's garbage fill it (a Wan 2.1
// 1.3B-shaped run at q8_0 peaked at 2.3x its weights). The percent becomes
// 100*heldHeadroom/w, at least 10 and at most the current setting, so a collection comes
// after about heldHeadroom bytes of garbage; weights and activations are pointer-free, so
// a collection costs little. It returns the function that puts the previous setting back;
// a GOGC set in the environment is left alone.
func collectorHeadroom(w int64) (restore func()) {
	pct := gcPercent(w)
	if os.Getenv("GOGC") != "" || pct < 0 {
		return func() {}
	}
	prev := debug.SetGCPercent(pct)
	if prev < 0 || prev <= pct {
		debug.SetGCPercent(prev)
		return func() {}
	}
	return func() { debug.SetGCPercent(prev) }
}

// gcPercent is collectorHeadroom's percent for weights of w bytes; -1 when w is small
// enough that the default allowance is less than heldHeadroom.
func gcPercent(w int64) int {
	if w <= 0 || 100*heldHeadroom/w >= 100 {
		return -1
	}
	return int(max(10, 100*heldHeadroom/w))
}
