//go:build !linux

package synthetic

import "time"

// preciseSleepUntil falls back to the runtime timer outside Linux.
func preciseSleepUntil(deadline time.Time) { time.Sleep(time.Until(deadline)) }
