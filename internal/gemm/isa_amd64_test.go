package gemm

// avx2KernelForTests is the AVX2 kernel, which an AVX-512 CPU also runs.
func avx2KernelForTests() isa { return avx2ISA }
