//go:build !amd64

package gemm

// bestISA is the portable kernel: only amd64 has assembly kernels.
func bestISA() isa { return goISA }
