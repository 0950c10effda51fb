// Package nn holds the GoMLX building blocks shared by vdpp's networks (the SVD UNet, VAE
// and CLIP image encoder, and the dummy model): PyTorch-semantics ops on *graph.Node, named
// weights, and a Program that compiles and runs a graph on a backend.
//
// # Contract
//
// Every op takes and returns tensors in PyTorch's layouts and computes what the matching
// torch.nn module computes in fp32: Linear weights are [out, in], Conv2D is NCHW with
// kernels [O, I, kh, kw], Conv3D is NCDHW ([N, C, T, H, W]) with kernels [O, I, kt, kh, kw],
// GroupNorm normalises [N, C, ...] in groups of channels with a biased variance, LayerNorm
// normalises the last axis, GELU is the exact erf form. Tests compare each op with a naive
// Go implementation (relative L2 <= 1e-6 in fp32).
//
// # Weights: how they are held and fed
//
// Weights are not embedded as graph constants (bad for XLA compile time and memory).
// A Weights value holds one backend buffer per tensor, named exactly as in the safetensors
// file ("down_blocks.0.resnets.1.spatial_res_block.conv1.weight"). Internally each tensor is
// a variable of a GoMLX context.Context (at the root scope, the whole dotted name being the
// variable name); context.Exec feeds the variables a graph uses as graph parameters, so on
// XLA they stay resident on the device and are never re-uploaded. NewWeightsStream builds
// the same from tensors produced one at a time (a checkpoint read tensor by tensor), so a
// loader never holds all of them in host memory at once.
//
// Network code never sees the context. It receives a Scope: a dotted prefix plus the source
// of the tensors. It descends with In and reads a tensor with Param, giving the shape it
// expects:
//
//	func resnet(s nn.Scope, g *graph.Graph, x *graph.Node, cin, cout int) *graph.Node {
//	    w := s.Param(g, "conv1.weight", cout, cin, 3, 3) // "…resnets.1.conv1.weight"
//	    b := s.Param(g, "conv1.bias", cout)
//	    return nn.Conv2D(x, w, b, nn.ConvOpts{Padding: 1})
//	}
//	h := resnet(root.In("down_blocks.0").In("resnets.1"), g, x, 320, 320)
//
// Param panics (GoMLX's graph-building convention; Program.Run turns the panic into an
// error) when the tensor is missing or its shape differs from the one declared.
//
// # Declaring the expected tensors
//
// The same network code yields the list of tensors it needs: Declare runs a graph-building
// function with a declaring Scope, in which Param records (name, shape) and returns a
// placeholder node of that shape; nothing is compiled or executed and no weight memory is
// allocated. A checkpoint loader compares the result with the file using CheckTensors,
// which reports missing, unexpected and mis-shaped tensors (ErrMissingTensor,
// ErrUnexpectedTensor, ErrShapeMismatch). Convention for network packages: export
//
//	func ExpectedTensors(cfg Config) (map[string][]int, error) // = nn.Declare(build-with-cfg)
//
// and build their graphs only through Scope.Param, so the two can never disagree.
//
// # Convolution form
//
// ConvFormFor chooses, in this one place, how Conv2D and Conv3D are lowered: with vdpp's
// CPU kernels one fused op (an implicit matrix product, no im2col tensor); on the plain
// simplego backend (whose ConvGeneral is a naive loop and which has no Pad op) an im2col
// form built from Slice/Concatenate feeding one DotGeneral (simplego's only parallel op); on
// every other backend (XLA) the native ConvGeneral. All forms are tested to agree.
//
// # Matrix products
//
// Linear and the im2col convolutions multiply through MatMulNT. On a simplego backend that
// runs vdpp's matrix kernel (Kernels.GEMM), float32 DotGenerals run on internal/gemm
// (AVX-512 or AVX2/FMA assembly) when the CPU has one (see CPU kernels below). Without it,
// MatMulNT cuts the rows into batch slices that simplego's small DotGeneral kernel runs in
// parallel (see docs/measurements/cpu-plain-simplego-2026-11-22.md). Elsewhere it is one
// DotGeneral.
//
// # CPU kernels
//
// Which of vdpp's CPU kernels run is a value carried by the backend: Kernels (the
// kernels= option of `--backend go`, parsed with the spec by backendspec; $VDPP_KERNELS is
// its environment default there), given to NewBackend through the spec, to
// NewResolvedBackend in the Resolution, or to NewGoBackend directly; KernelsOf reads it
// back and DescribeKernels says it in one line ("vdpp doctor" and report.json print it).
// internal/sghook, the one place that touches simplego's internals, runs the matrix kernel
// and the float32 elementwise executors for the backends that select them, and adds fused
// ops to a graph only while a Program builds it (an inference graph). The building blocks
// here (Attention, FusedAttention, GroupNorm, LayerNorm, RMSNorm, Conv2D, Linear, ...)
// emit one fused op instead of their graph of small ops when useKernels says so: a float32
// inference graph on a backend with Kernels.Fused. Everywhere else (XLA, kernels off, and
// any graph not built by a Program, such as a training step) they build the plain graph,
// whose gradient GoMLX knows, so a training graph needs no marking to be correct.
// KernelsRan counts the fused ops that ran on a backend.
//
// Adding a fused op: write the kernel on flat slices (internal/kernels, or a package of
// its own such as internal/qgemm), give it an sghook.Kernel adapter in kernels.go (Name,
// Run; a BytesKernel's RunBytes for uint8 inputs such as compact weights), and in the
// building block call it behind `if useKernels(g, dtype)` with sghook.Emit, keeping the
// plain graph as the fallback; add the name to FusedOps and a case to
// TestFusedMatchesPlain (docs/design.md, CPU kernels).
//
// # Attention form
//
// AttentionChunkFor chooses, in this one place, how attention is blocked: the query chunk
// that keeps one block of scores within the backend's budget (SimpleGoScoreBudget,
// XLAScoreBudget). Network code calls AttentionAuto, which applies it.
//
// # Backends
//
// NewBackend resolves a --backend value with the backendspec package ("" automatic, "go",
// "xla:cuda", "xla:/path/plugin.so"), sets the environment an offline XLA CUDA plugin needs,
// and creates the backend; failures name what was looked for and how to fix it.
//
// # Executing
//
// Program compiles a graph-building function once per set of input shapes (a cache keyed by
// shapes) and runs it on []*tensor.Dense inputs, returning []*tensor.Dense outputs.
// A Program is safe for concurrent use; graph building and compilation are serialised. Its
// graphs are inference graphs (fused ops, the fastest forms); a graph whose gradient is
// taken is built with GoMLX's own Exec (package train) and gets the differentiable forms
// (GradientSafe).
//
// Float16 is not a simplego dtype: loaders convert fp16 checkpoints to float32 before
// NewWeights. Rsqrt has no gradient in GoMLX v0.26; the ops here use x / Sqrt(v).
package nn
