// Package backendspec turns a --backend value into the GoMLX backend configuration vdpp
// will create, and the process settings that configuration needs, without creating it.
//
// # Contract
//
// Resolve is pure: everything it learns about the host (environment variables, files, the
// nvidia-smi command) comes through a Probe whose fields tests replace. It accepts
//
//	""                 automatic: $GOMLX_BACKEND when set; otherwise "xla:cuda" when an
//	                   NVIDIA GPU and a CUDA PJRT plugin are both found; otherwise "go"
//	"go"               GoMLX's pure-Go simplego backend ("simplego" and "go:OPTIONS" are
//	                   aliases; nn creates it with its own options)
//	"xla:cuda"         the XLA backend on the CUDA PJRT plugin found on the host ("cuda"
//	                   is an alias); an error naming every place searched when none is
//	"xla:/path/x.so"   the XLA backend on that plugin file (relative paths are made absolute)
//	"xla:NAME", "xla"  passed to GoMLX, which searches its own plugin folders
//
// GoMLX plugin options after a comma ("xla:cuda,tf32") are kept.
//
// A go backend's options may include vdpp's own kernels=K (Kernels, ParseKernels): which of
// vdpp's CPU kernels it runs, "on" (every one: the default), "gemm" (the matrix kernel
// only), "off" (GoMLX's own simplego), or the parts joined by "+" ("gemm+ops"):
// "go:kernels=off", "go:parallelism=2,kernels=gemm". Without it, $VDPP_KERNELS gives the
// value, as $GOMLX_BACKEND gives the spec; Resolution.Kernels is the result (none for XLA).
//
// For every XLA configuration the Resolution carries, in Env, the settings an offline
// machine needs (GOMLX_NO_AUTO_INSTALL=1, so GoMLX never tries to download plugins;
// GOMLX_BACKEND=the resolved configuration, for child processes); for a CUDA plugin also
// XLA_FLAGS with --xla_gpu_cuda_data_dir pointing at a CUDA folder that holds
// nvvm/libdevice (go-xla v0.1.4 otherwise writes a wrong default path), and, in Options, the
// PJRT client options (no up-front allocation of 75% of the GPU, so several vdpp processes
// can share one GPU; VDPP_XLA_PREALLOCATE=1 and VDPP_XLA_MEM_FRACTION override). Apply sets
// Env; it is the one place vdpp changes the environment for a backend.
//
// What cannot be checked without loading the plugin (a CUDA library missing, a driver too
// old) is reported as Warnings, and Hint turns a backend-creation failure into a message
// that names what was looked for and how to fix it.
package backendspec
