package synthetic

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// preciseSleepUntil sleeps to the deadline with nanosleep on a locked thread whose timer
// slack is 1 ns. Go's own timers round sub-millisecond waits up to about a millisecond,
// which would make a 1 ms step cost 1.07 ms or more; this lands within ~20 µs.
func preciseSleepUntil(deadline time.Time) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, _, _ = syscall.Syscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: loop re-computes the remainder
	}
}
