// Package sghook is the one place where vdpp reaches into GoMLX v0.26's pure-Go backend
// (simplego) to run its own CPU kernels. GoMLX v0.26 has no public way to add an op or to
// replace a kernel (no custom call, no kernel registry), so this package:
//
//   - replaces simplego's float32 matrix-product kernel (the normalised DotGeneral) with
//     internal/gemm;
//   - replaces simplego's executors of float32 elementwise ops (add, subtract, multiply,
//     divide, max, min with broadcasting; exp, sigmoid, erf, tanh) and transposes with
//     kernels that run over all cores, falling back to simplego's own for other dtypes;
//   - adds fused ops: Emit builds a graph node whose backend op runs a Kernel (attention,
//     a normalisation, a convolution) as one op. The node is created as an Iota of the
//     output shape and then given the kernel's inputs and the kernel as its data; the Iota
//     executor, wrapped here, runs the kernel for such nodes and simplego's Iota otherwise.
//     A BytesKernel also takes uint8 inputs (a weight held compact, as its bytes); FusedOf
//     finds the kernel and inputs of a fused node, so graph code can read through a
//     widening op to the bytes it widens.
//
// Everything it touches is checked when Install runs: the layouts of simplego's Node and
// Buffer and of graph.Node are compared field by field (name, type, offset) with the
// mirrors declared here, the linked tables must hold what they should, and a fused op is
// built and run once. Any mismatch (a GoMLX upgrade) makes Install return an error and
// leaves simplego untouched; a test fails then. The go.mod pins GoMLX v0.26.0.
//
// Kernels installed here run only on simplego graphs; the XLA backend never sees them, and
// Emit is only called by graph code that first asked Enabled.
package sghook
