// Package wait is the tests' one way to wait for something they can observe: For polls a
// condition (a file written, a status reached, a counter moved) until it holds or a limit
// passes. Tests order concurrent events by what they observe, through channels, hooks or
// this helper, never by sleeping a guessed while.
//
// Contract: For returns true as soon as a check of cond holds and false once limit has
// passed without one; cond is checked at least once, first at once, then at intervals that
// start at a millisecond and double up to 50 ms (a condition that holds soon costs a few
// checks; one that takes seconds, about twenty checks a second). Inside a testing/synctest
// bubble the intervals and the limit are the bubble's fake time.
package wait

import "time"

// maxInterval bounds the pause between two checks.
const maxInterval = 50 * time.Millisecond

// For polls cond until it holds (true) or limit passes (false).
func For(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for pause := time.Millisecond; ; pause = min(2*pause, maxInterval) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		// The pause between two checks of an observable condition: what is awaited is
		// the condition, not the time.
		time.Sleep(min(pause, left))
	}
}
