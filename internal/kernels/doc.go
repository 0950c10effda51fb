// Package kernels holds vdpp's fused float32 CPU kernels: attention, normalisations,
// convolutions and the elementwise functions they need (a float32 exp). They work on flat
// row-major slices and know nothing of GoMLX; internal/sghook runs them as ops of GoMLX's
// pure-Go backend.
//
// The contract every kernel keeps: it writes every output element; it may split its work
// over the cores (internal/parallel), but each output element is computed by one
// goroutine in an order fixed by the shapes alone, so the result is the same bits for any
// GOMAXPROCS and any split, and an element of one batch row does not depend on the other
// rows (a call on one row gives the bits that row gets in a call on many).
package kernels
