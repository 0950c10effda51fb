//go:build !amd64

package qgemm

// bestISA is the portable kernel set: only amd64 has assembly kernels.
func bestISA() isa { return goISA }
