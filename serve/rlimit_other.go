//go:build !unix

package serve

// fileLimit is a conservative descriptor budget where there is no RLIMIT_NOFILE.
func fileLimit() uint64 { return 1024 }
