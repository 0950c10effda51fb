// Package sghook is the one place where vdpp reaches into GoMLX v0.26's pure-Go backend
// (simplego) to run its own CPU kernels. GoMLX v0.26 has no public way to add an op or to
// replace a kernel (no custom call, no kernel registry), so this package installs, once
// per process, executors of its own in simplego's executor table:
//
//   - DotGeneral: float32 products run on internal/gemm (the operands brought to the
//     [batch, rows, contraction] layout first, as simplego's own small-matrix path does);
//   - float32 elementwise ops (add, subtract, multiply, divide, max, min with
//     broadcasting; exp, sigmoid, erf, tanh) and transposes, on internal/kernels, over all
//     cores;
//   - fused ops: Emit builds a graph node whose backend op runs a Kernel (attention, a
//     normalisation, a convolution, ...) as one op. The node is created as an Iota of the
//     output shape and then given the kernel's inputs and the kernel as its data; the Iota
//     executor, wrapped here, runs the kernel for such nodes and simplego's Iota otherwise.
//     A BytesKernel also takes uint8 inputs (a weight held compact, as its bytes); FusedOf
//     finds the kernel and inputs of a fused node, so graph code can read through a
//     widening op to the bytes it widens.
//
// # Selection is a value carried by the backend
//
// The executors are inert until a backend asks for them: Enable records in a simplego
// backend which Parts it runs (in the backend itself, so the record lives and dies with
// it), every installed executor looks the record up and runs simplego's own code for a
// backend that did not enable its part, and Enabled reports the record. Two backends of
// one process may run different parts.
//
// Fused ops have no gradient, so a graph gets them only where its builder opts in:
// Inference runs a graph's build function with the graph marked as an inference graph of
// its backend, and Emit refuses any graph that is not marked while a backend with Fused
// builds it. A graph built without Inference (a training graph) can never contain a fused
// op, whatever code builds it.
//
// # Guards
//
// Everything Install touches is checked first: the layouts of simplego's Node, Buffer,
// Backend (its first field, the buffer pools where the record is kept) and DotGeneral
// parameters and of graph.Node are compared field by field (name, type, offset) with the
// mirrors declared here, the linked tables must hold what they should, and a graph with a
// fused op and a product is built and run once. Any mismatch (a GoMLX upgrade) makes
// Install return an error and leaves simplego untouched; a test fails then. The go.mod
// pins GoMLX v0.26.0.
//
// Kernels installed here run only on simplego graphs; the XLA backend never sees them.
package sghook
