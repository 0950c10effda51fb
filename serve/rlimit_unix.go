//go:build unix

package serve

import "syscall"

// fileLimit raises the soft RLIMIT_NOFILE to the hard limit (Go's runtime does this at
// start-up on Linux; doing it here too keeps the rule independent of that) and returns
// the soft limit in force.
func fileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	if r.Cur < r.Max {
		raised := syscall.Rlimit{Cur: r.Max, Max: r.Max}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			r.Cur = r.Max
		}
	}
	return r.Cur
}
