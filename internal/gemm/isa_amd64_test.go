package gemm

// avx2KernelForTests is the other kernels an AVX-512 CPU also runs.
func avx2KernelForTests() []isa { return []isa{avx2ISA} }
