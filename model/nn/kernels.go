package nn

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/kernels"
	"github.com/vdpp/vdpp/internal/sghook"
)

// KernelsEnv names the environment variable that selects vdpp's CPU kernels on the pure-Go
// backend: unset (or "on") installs all of them, "gemm" only the matrix-product kernel,
// "off" none (GoMLX's plain simplego, for comparisons).
const KernelsEnv = "VDPP_KERNELS"

var (
	kernelsOnce  sync.Once
	kernelsParts sghook.Parts
	kernelsErr   error
)

// CPUKernels installs vdpp's CPU kernels into simplego, once per process (the first
// simplego backend does it), as KernelsEnv selects, and reports what is installed and,
// if something could not be, why (nil when it was turned off on purpose). The matrix
// kernel is installed only where internal/gemm has an assembly kernel.
func CPUKernels() (sghook.Parts, error) {
	kernelsOnce.Do(func() {
		var want sghook.Parts
		switch v := os.Getenv(KernelsEnv); v {
		case "", "on":
			want = sghook.All
		case "gemm":
			want = sghook.GEMM
		case "off":
		default:
			kernelsErr = fmt.Errorf("nn: %s=%q: want on, gemm or off", KernelsEnv, v)
			return
		}
		if !gemm.Accelerated() {
			want &^= sghook.GEMM
		}
		if want == 0 {
			return
		}
		kernelsErr = sghook.Install(want)
		kernelsParts = sghook.Installed()
	})
	return kernelsParts, kernelsErr
}

// KernelsStatus describes the CPU kernels in use, for `vdpp doctor`.
func KernelsStatus() string {
	parts, err := CPUKernels()
	var s string
	switch {
	case parts&sghook.Fused != 0:
		s = "vdpp kernels (fused " + fusedOps + "; matrix kernel " + gemm.Kernel() + ")"
	case parts&sghook.GEMM != 0:
		s = "simplego with vdpp's matrix kernel (" + gemm.Kernel() + ")"
	default:
		s = "simplego's own (scalar Go)"
	}
	if err != nil {
		s += ": " + err.Error()
	} else if v := os.Getenv(KernelsEnv); v != "" && v != "on" {
		s += " (" + KernelsEnv + "=" + v + ")"
	}
	return s
}

// fusedOps lists the building blocks that run as fused ops.
const fusedOps = "attention, norms, convolutions, linear layers"

// fusedGEMM reports whether simplego's products run on internal/gemm.
func fusedGEMM() bool {
	parts, _ := CPUKernels()
	return parts&sghook.GEMM != 0
}

// useKernels reports whether the graph code of this package emits vdpp's fused CPU ops in
// g: a simplego graph, kernels installed, not a training graph (fused ops have no
// gradient), float32 values.
func useKernels(g *Graph, dt dtypes.DType) bool {
	return dt == dtypes.Float32 && !plainGraphs.Load() && sghook.Fusable(g) && !IsTraining(g)
}

// plainGraphs makes useKernels false: tests build the plain graphs with it to compare.
var plainGraphs atomic.Bool

// UsesKernels reports whether graph code on backend b runs vdpp's fused CPU ops (for
// float32 values outside training).
func UsesKernels(b backends.Backend) bool {
	parts, _ := CPUKernels()
	return parts&sghook.Fused != 0 && IsSimpleGo(b)
}

// attentionKernel is kernels.Attention as a fused op: inputs q, k, v[, bias].
type attentionKernel struct{ shape kernels.AttentionShape }

func (attentionKernel) Name() string { return "attention" }
func (a attentionKernel) Run(out []float32, ins [][]float32) {
	var bias []float32
	if len(ins) > 3 {
		bias = ins[3]
	}
	kernels.Attention(out, ins[0], ins[1], ins[2], bias, a.shape)
}

// FusedAttention is multi-head attention softmax(scale·q·kᵀ + bias)·v as one fused CPU op,
// for q [B, Sq, H·d], k and v [B, Sk, H·d] and bias [1 or B, H, Sq, Sk] or nil; ok is false
// (and nothing is added to the graph) where fused ops are not used, and the caller builds
// its own graph. scale is rounded to float32 as MulScalar rounds it. The fused op computes the softmax's exponentials in float32 and divides
// by their sum after the product with v.
func FusedAttention(q, k, v, bias *Node, heads int, scale float64) (out *Node, ok bool) {
	if !useKernels(q.Graph(), q.DType()) {
		return nil, false
	}
	b, sq, dm := q.Shape().Dim(0), q.Shape().Dim(1), q.Shape().Dim(2)
	sh := kernels.AttentionShape{B: b, Sq: sq, Sk: k.Shape().Dim(1), H: heads, D: dm / heads, Scale: float32(scale)}
	ins := []*Node{q, k, v}
	if bias != nil {
		bd := bias.Shape().Dimensions
		if len(bd) != 4 || bd[1] != heads || bd[2] != sq || bd[3] != sh.Sk || (bd[0] != 1 && bd[0] != b) {
			panic(fmt.Errorf("nn: FusedAttention: bias %v for q %v, k %v, %d heads", bias.Shape(), q.Shape(), k.Shape(), heads))
		}
		sh.BiasBatch = bd[0]
		ins = append(ins, bias)
	}
	if err := sh.Validate(); err != nil || k.Shape().Dim(0) != b || !v.Shape().Equal(k.Shape()) || k.Shape().Dim(2) != dm {
		panic(fmt.Errorf("nn: FusedAttention: q %v, k %v, v %v with %d heads", q.Shape(), k.Shape(), v.Shape(), heads))
	}
	return sghook.Emit(q.Graph(), shapes.Make(dtypes.Float32, b, sq, dm), attentionKernel{sh}, ins...), true
}

// inPlace0 marks a kernel whose output may overwrite its first input.
type inPlace0 struct{}

func (inPlace0) InPlaceInput() int { return 0 }

// groupNormKernel is kernels.GroupNorm: inputs x[, gamma][, beta].
type groupNormKernel struct {
	inPlace0
	shape             kernels.GroupNormShape
	hasGamma, hasBeta bool
}

func (groupNormKernel) Name() string { return "group norm" }
func (k groupNormKernel) Run(out []float32, ins [][]float32) {
	gamma, beta := optionalInputs(ins[1:], k.hasGamma, k.hasBeta)
	kernels.GroupNorm(out, ins[0], gamma, beta, k.shape)
}

// optionalInputs spreads the inputs present (in order) over the flags.
func optionalInputs(ins [][]float32, has ...bool) (a, b []float32) {
	out := make([][]float32, len(has))
	for i, h := range has {
		if h {
			out[i], ins = ins[0], ins[1:]
		}
	}
	return out[0], out[1]
}

// presentNodes returns x followed by the non-nil nodes of opt.
func presentNodes(x *Node, opt ...*Node) []*Node {
	ins := []*Node{x}
	for _, n := range opt {
		if n != nil {
			ins = append(ins, n)
		}
	}
	return ins
}

func fusedGroupNorm(x, gamma, beta *Node, groups int, eps float64, silu bool) (*Node, bool) {
	if !useKernels(x.Graph(), x.DType()) {
		return nil, false
	}
	dims := x.Shape().Dimensions
	sh := kernels.GroupNormShape{N: dims[0], C: dims[1], S: x.Shape().Size() / (dims[0] * dims[1]), Groups: groups, Eps: eps, SiLU: silu}
	k := groupNormKernel{shape: sh, hasGamma: gamma != nil, hasBeta: beta != nil}
	return sghook.Emit(x.Graph(), x.Shape(), k, presentNodes(x, gamma, beta)...), true
}

// rowNormKernel is kernels.RowNorm: inputs x[, gamma][, beta][, scale, shift].
type rowNormKernel struct {
	inPlace0
	shape             kernels.RowNormShape
	hasGamma, hasBeta bool
}

func (k rowNormKernel) Name() string { return "row norm" }
func (k rowNormKernel) Run(out []float32, ins [][]float32) {
	rest := ins[1:]
	gamma, beta := optionalInputs(rest, k.hasGamma, k.hasBeta)
	var scale, shift []float32
	if k.shape.ModRows > 0 {
		scale, shift = ins[len(ins)-2], ins[len(ins)-1]
	}
	kernels.RowNorm(out, ins[0], gamma, beta, scale, shift, k.shape)
}

// fusedRowNorm emits LayerNorm or RMSNorm over the last axis with optional modulation
// (scale and shift both set; x then [B, S, D], they [B or 1, S or 1, D]).
func fusedRowNorm(x, gamma, beta, scale, shift *Node, eps float64, rms bool) (*Node, bool) {
	if !useKernels(x.Graph(), x.DType()) || x.Rank() < 1 {
		return nil, false
	}
	d := x.Shape().Dim(-1)
	sh := kernels.RowNormShape{Rows: x.Shape().Size() / d, D: d, Eps: eps, RMS: rms}
	ins := presentNodes(x, gamma, beta)
	if scale != nil || shift != nil {
		if scale == nil || shift == nil || x.Rank() != 3 {
			return nil, false
		}
		b, s := x.Shape().Dim(0), x.Shape().Dim(1)
		mods := []*Node{scale, shift}
		sm := 1
		for _, m := range mods {
			md := m.Shape().Dimensions
			if len(md) != 3 || md[2] != d || (md[0] != 1 && md[0] != b) || (md[1] != 1 && md[1] != s) {
				return nil, false
			}
			sm = max(sm, md[1])
		}
		for i, m := range mods {
			if m.Shape().Dim(0) != b || m.Shape().Dim(1) != sm {
				mods[i] = BroadcastToDims(m, b, sm, d)
			}
		}
		sh.ModRows, sh.RowsPerBatch = sm, s
		ins = append(ins, mods...)
	}
	k := rowNormKernel{shape: sh, hasGamma: gamma != nil, hasBeta: beta != nil}
	return sghook.Emit(x.Graph(), x.Shape(), k, ins...), true
}

// channelNormKernel is kernels.ChannelRMSNorm: inputs x, gamma.
type channelNormKernel struct {
	inPlace0
	shape kernels.ChannelRMSNormShape
}

func (channelNormKernel) Name() string { return "channel L2 norm" }
func (k channelNormKernel) Run(out []float32, ins [][]float32) {
	kernels.ChannelRMSNorm(out, ins[0], ins[1], k.shape)
}

func fusedChannelL2Norm(x, gamma *Node, eps float64, silu bool) (*Node, bool) {
	if !useKernels(x.Graph(), x.DType()) || x.Rank() < 2 {
		return nil, false
	}
	dims := x.Shape().Dimensions
	sh := kernels.ChannelRMSNormShape{N: dims[0], C: dims[1], S: x.Shape().Size() / (dims[0] * dims[1]), Eps: eps, SiLU: silu}
	return sghook.Emit(x.Graph(), x.Shape(), channelNormKernel{shape: sh}, x, Reshape(gamma, dims[1])), true
}

// convKernel is kernels.Conv: inputs x, w[, bias]; w float32, or the bytes of a weight
// held compact (held set), which RunBytes widens a group of output channels at a time.
type convKernel struct {
	shape kernels.ConvShape
	held  *heldWeight
}

func (convKernel) Name() string { return "convolution" }
func (k convKernel) Run(out []float32, ins [][]float32) {
	var bias []float32
	if len(ins) > 2 {
		bias = ins[2]
	}
	kernels.Conv(out, ins[0], ins[1], bias, k.shape)
}
func (k convKernel) RunBytes(out []float32, ins [][]float32, raw [][]byte) {
	var bias []float32
	if len(ins) > 2 {
		bias = ins[2]
	}
	kernels.ConvMatrix(out, ins[0], heldRows{k.held, raw[1]}, bias, k.shape)
}

// fusedConv emits the convolution of x [N, C, s...] (1 to 3 spatial axes) by w [O, C, k...]
// plus b [O] (or nil) as one op.
func fusedConv(x, w, b *Node, stride int, pads [][2]int) (*Node, bool) {
	d := x.Rank() - 2
	if !useKernels(x.Graph(), x.DType()) || d < 1 || d > 3 || w.DType() != x.DType() {
		return nil, false
	}
	xd, wd := x.Shape().Dimensions, w.Shape().Dimensions
	sh := kernels.ConvShape{N: xd[0], C: xd[1], O: wd[0], Stride: stride}
	for i := range 3 {
		sh.In[i], sh.K[i] = 1, 1
	}
	for i := range d {
		sh.In[3-d+i], sh.K[3-d+i], sh.Pads[3-d+i] = xd[2+i], wd[2+i], pads[i]
	}
	if sh.Validate() != nil {
		return nil, false
	}
	o := sh.Out()
	out := append([]int{sh.N, sh.O}, o[3-d:]...)
	ck := convKernel{shape: sh}
	if h, bytes, ok := heldOf(w); ok {
		ck.held, w = h, bytes // read the weight as held, widening a group of channels at a time
	}
	ins := []*Node{x, w}
	if b != nil {
		ins = append(ins, b)
	}
	return sghook.Emit(x.Graph(), shapes.Make(dtypes.Float32, out...), ck, ins...), true
}

// linearKernel is kernels.Linear: inputs x, w[, bias]; w float32, or the bytes of a weight
// held compact (held set), which RunBytes reads as held.
type linearKernel struct {
	shape kernels.LinearShape
	held  *heldWeight
}

func (linearKernel) Name() string { return "linear" }
func (k linearKernel) Run(out []float32, ins [][]float32) {
	var bias []float32
	if len(ins) > 2 {
		bias = ins[2]
	}
	kernels.Linear(out, ins[0], ins[1], bias, k.shape)
}
func (k linearKernel) RunBytes(out []float32, ins [][]float32, raw [][]byte) {
	var bias []float32
	if len(ins) > 2 {
		bias = ins[2]
	}
	kernels.LinearMatrix(out, ins[0], k.held.matrix(raw[1]), bias, k.shape)
}

// fusedLinear emits act(x·wᵀ + b) (or GEGLU's hidden·GELU(gate) of it) as one op.
func fusedLinear(x, w, b *Node, act Activation, geglu bool) (*Node, bool) {
	if !useKernels(x.Graph(), x.DType()) || w.DType() != x.DType() {
		return nil, false
	}
	dims := x.Shape().Dimensions
	k, n := dims[len(dims)-1], w.Shape().Dim(0)
	sh := kernels.LinearShape{M: x.Shape().Size() / k, N: n, K: k, GEGLU: geglu,
		Act: map[Activation]kernels.Activation{ActNone: kernels.NoActivation, ActGELU: kernels.GELU,
			ActGELUTanh: kernels.GELUTanh, ActSiLU: kernels.SiLUAct}[act]}
	out := append(slices.Clone(dims[:len(dims)-1]), sh.OutCols())
	lk := linearKernel{shape: sh}
	if h, bytes, ok := heldOf(w); ok {
		// Read the weight as held: the widening op Param made is left unused.
		lk.held, w = h, bytes
	}
	ins := []*Node{x, w}
	if b != nil {
		ins = append(ins, b)
	}
	return sghook.Emit(x.Graph(), shapes.Make(dtypes.Float32, out...), lk, ins...), true
}
