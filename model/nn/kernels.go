package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/kernels"
	"github.com/vdpp/vdpp/internal/sghook"
	"github.com/vdpp/vdpp/model/nn/backendspec"
)

// Kernels selects vdpp's CPU kernels on the pure-Go backend: the kernels= option of
// `--backend go` (backendspec.Kernels). A backend carries its selection (NewBackend,
// NewGoBackend); every graph built on it runs the matrix kernel (GEMM) and the elementwise
// executors (Ops) it selects, and fused ops (Fused) run only in the graphs of inference
// Programs (NewProgram), never in a graph whose gradient may be taken.
type Kernels = backendspec.Kernels

// AllKernels is every CPU kernel: the default.
var AllKernels = backendspec.KernelsOn

// NewGoBackend returns a pure-Go (simplego) backend that runs the CPU kernels k.
func NewGoBackend(k Kernels) (backends.Backend, error) {
	return NewResolvedBackend(backendspec.Resolution{Spec: "go", Source: "flag", Kind: backendspec.KindGo, Config: "go", Kernels: k})
}

// kernelParts turns a selection into what internal/sghook installs: the matrix kernel only
// where internal/gemm has an assembly kernel.
func kernelParts(k Kernels) sghook.Parts {
	var p sghook.Parts
	if k.GEMM && gemm.Accelerated() {
		p |= sghook.GEMM
	}
	if k.Ops {
		p |= sghook.Ops
	}
	if k.Fused {
		p |= sghook.Fused
	}
	return p
}

// enableKernels makes the simplego backend b run the kernels k. When they cannot be
// installed (sghook's checks failed: GoMLX is not the version go.mod pins) b keeps
// simplego's own code and DescribeKernels says why.
func enableKernels(b backends.Backend, k Kernels) {
	if err := sghook.Enable(b, kernelParts(k)); err != nil {
		_ = sghook.Enable(b, 0)
	}
}

// KernelsOf reports the CPU kernels backend b runs: none on XLA, on a simplego backend
// not made by this package, or where they could not be installed; no GEMM where
// internal/gemm has no assembly kernel.
func KernelsOf(b backends.Backend) Kernels {
	p := sghook.Enabled(b)
	return Kernels{GEMM: p&sghook.GEMM != 0, Ops: p&sghook.Ops != 0, Fused: p&sghook.Fused != 0}
}

// FusedOps names the fused ops of this package (the Kernel names KernelsRan counts).
var FusedOps = []string{attentionKernel{}.Name(), groupNormKernel{}.Name(), rowNormKernel{}.Name(),
	channelNormKernel{}.Name(), convKernel{}.Name(), linearKernel{}.Name(), widenKernel{}.Name(), groupAffineKernel{}.Name()}

// DescribeKernels says in one line which kernels graph code on backend b runs, for
// `vdpp doctor`, logs and report.json: "xla" off simplego, else the matrix kernel, the
// elementwise executors and the fused ops, and why the CPU kernels are missing when they
// could not be installed.
func DescribeKernels(b backends.Backend) string {
	if !IsSimpleGo(b) {
		return "xla (no vdpp CPU kernels)"
	}
	k := KernelsOf(b)
	var parts []string
	if k.GEMM {
		parts = append(parts, "matrix kernel internal/gemm "+gemm.Kernel())
	} else {
		parts = append(parts, "simplego's matrix kernel")
	}
	if k.Ops {
		parts = append(parts, "vdpp's elementwise executors")
	}
	if k.Fused {
		parts = append(parts, "fused ops in inference programs ("+strings.Join(FusedOps, ", ")+")")
	}
	s := "go: " + strings.Join(parts, "; ")
	if err := sghook.Install(); err != nil {
		s += " (vdpp's CPU kernels are not installed: " + err.Error() + ")"
	}
	return s
}

// KernelsRan returns how many times each fused op ran on backend b (by name, see
// FusedOps).
func KernelsRan(b backends.Backend) map[string]int64 { return sghook.Ran(b) }

// useKernels reports whether the graph code of this package emits fused CPU ops in g: an
// inference graph (built by a Program) on a backend that runs them, float32 values.
func useKernels(g *Graph, dt dtypes.DType) bool {
	return dt == dtypes.Float32 && sghook.Fusable(g)
}

// UsesKernels reports whether inference graphs on backend b run vdpp's fused CPU ops (for
// float32 values).
func UsesKernels(b backends.Backend) bool { return KernelsOf(b).Fused }

// gemmBackend reports whether float32 products on backend b run on internal/gemm.
func gemmBackend(b backends.Backend) bool { return KernelsOf(b).GEMM }

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

func fusedGroupNorm(x, gamma, beta *Node, groups, parts int, eps float64, silu bool) (*Node, bool) {
	if !useKernels(x.Graph(), x.DType()) {
		return nil, false
	}
	dims := x.Shape().Dimensions
	sh := kernels.GroupNormShape{N: dims[0], C: dims[1], S: x.Shape().Size() / (dims[0] * dims[1]), Groups: groups, Eps: eps, SiLU: silu}
	if parts > 1 {
		sh.Parts = parts
	}
	k := groupNormKernel{shape: sh, hasGamma: gamma != nil, hasBeta: beta != nil}
	return sghook.Emit(x.Graph(), x.Shape(), k, presentNodes(x, gamma, beta)...), true
}

// groupAffineKernel is kernels.GroupAffine: inputs v, stats[, gamma][, beta].
type groupAffineKernel struct {
	inPlace0
	shape             kernels.GroupAffineShape
	hasGamma, hasBeta bool
}

func (groupAffineKernel) Name() string { return "group norm apply" }
func (k groupAffineKernel) Run(out []float32, ins [][]float32) {
	gamma, beta := optionalInputs(ins[2:], k.hasGamma, k.hasBeta)
	kernels.GroupAffine(out, ins[0], ins[1], gamma, beta, k.shape)
}

func fusedGroupAffine(v, stats, gamma, beta *Node, groups int, silu bool) (*Node, bool) {
	if !useKernels(v.Graph(), v.DType()) {
		return nil, false
	}
	d := v.Shape().Dimensions
	sh := kernels.GroupAffineShape{N: d[0], F: d[1], C: d[2], S: v.Shape().Size() / (d[0] * d[1] * d[2]), Groups: groups, SiLU: silu}
	k := groupAffineKernel{shape: sh, hasGamma: gamma != nil, hasBeta: beta != nil}
	return sghook.Emit(v.Graph(), v.Shape(), k, presentNodes(v, stats, gamma, beta)...), true
}

// rowNormKernel is kernels.RowNorm: inputs x[, gamma][, beta][, scale, shift].
type rowNormKernel struct {
	inPlace0
	shape             kernels.RowNormShape
	hasGamma, hasBeta bool
}

func (k rowNormKernel) Name() string { return "row norm" }
func (k rowNormKernel) Run(out []float32, ins [][]float32) {
	gamma, beta := optionalInputs(ins[1:], k.hasGamma, k.hasBeta)
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
