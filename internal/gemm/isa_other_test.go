//go:build !amd64

package gemm

func avx2KernelForTests() []isa { return nil }
