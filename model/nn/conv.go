package nn

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// ConvForm is how a convolution is lowered to backend ops.
type ConvForm int

const (
	// ConvAuto picks the form with ConvFormFor(the graph's backend).
	ConvAuto ConvForm = iota
	// ConvIm2Col gathers the input patches with Slice/Concatenate (channels last) and
	// contracts them with the kernel in one DotGeneral.
	ConvIm2Col
	// ConvNative uses the backend's ConvGeneral.
	ConvNative
	// ConvGather is im2col with the patches gathered by one Gather: the form whose
	// gradient simplego can run (see GradientSafe); same values as ConvIm2Col.
	ConvGather
	// ConvFused is vdpp's fused CPU convolution (one op, bias included): an implicit
	// matrix product that gathers the patches block by block into the matrix kernel's
	// layout, never as a whole (see UsesKernels). Where fused ops are not used (float64,
	// graphs outside a Program, backends without Kernels.Fused) it falls back to
	// ConvIm2Col.
	ConvFused
)

// String names the form.
func (f ConvForm) String() string {
	switch f {
	case ConvAuto:
		return "auto"
	case ConvIm2Col:
		return "im2col"
	case ConvNative:
		return "native"
	case ConvGather:
		return "gather"
	case ConvFused:
		return "fused"
	}
	return fmt.Sprintf("ConvForm(%d)", int(f))
}

// ConvFormFor is the one place that decides how convolutions run on a backend in inference
// graphs: vdpp's fused CPU convolution where the backend runs fused ops (UsesKernels), else im2col +
// DotGeneral on simplego (its ConvGeneral is a naive single-threaded loop, about 10x
// slower, and it has no Pad op), the native ConvGeneral everywhere else (XLA).
func ConvFormFor(b backends.Backend) ConvForm {
	if UsesKernels(b) {
		return ConvFused
	}
	if IsSimpleGo(b) {
		return ConvIm2Col
	}
	return ConvNative
}

// ConvFormForGraph is ConvFormFor for a graph: ConvGather in a GradientSafe graph (on
// simplego, any graph not built by a Program), ConvFormFor(its backend) otherwise.
func ConvFormForGraph(g *Graph) ConvForm {
	if GradientSafe(g) {
		return ConvGather
	}
	return ConvFormFor(g.Backend())
}

// ConvOpts configures Conv2D and Conv3D. The zero value is stride 1, no padding, form
// chosen by the backend.
type ConvOpts struct {
	// Stride applies to every spatial axis; 0 means 1.
	Stride int
	// Padding is the symmetric zero padding of every spatial axis (PyTorch's padding=p).
	Padding int
	// Pads, when not nil, gives the (before, after) zero padding of each spatial axis and
	// overrides Padding; e.g. the VAE encoder's Downsample pads H and W by (0, 1).
	Pads [][2]int
	// Form forces a lowering; ConvAuto (the default) uses ConvFormFor.
	Form ConvForm
}

// Conv2D is torch.nn.functional.conv2d: x [N, C, H, W], w [O, C, kh, kw], b [O] or nil;
// the result is [N, O, Ho, Wo] with Ho = (H + padH − kh)/stride + 1.
func Conv2D(x, w, b *Node, o ConvOpts) *Node { return convND(x, w, b, o, 2) }

// Conv3D is torch.nn.functional.conv3d: x [N, C, T, H, W], w [O, C, kt, kh, kw], b [O] or
// nil.
func Conv3D(x, w, b *Node, o ConvOpts) *Node { return convND(x, w, b, o, 3) }

// Conv3DTime is the temporal convolution of SVD's TemporalResnetBlock: Conv3D with kernel
// (3, 1, 1) and padding (1, 0, 0) on x [N, C, T, H, W], w [O, C, 3, 1, 1]. It mixes frames
// only.
func Conv3DTime(x, w, b *Node) *Node {
	kd := w.Shape().Dimensions
	if len(kd) != 5 || kd[3] != 1 || kd[4] != 1 {
		panic(fmt.Errorf("nn: Conv3DTime: kernel %v is not [O, C, kt, 1, 1]", w.Shape()))
	}
	p := (kd[2] - 1) / 2
	return Conv3D(x, w, b, ConvOpts{Pads: [][2]int{{p, p}, {0, 0}, {0, 0}}})
}

// convND checks the arguments and dispatches to a lowering.
func convND(x, w, b *Node, o ConvOpts, d int) *Node {
	if x.Rank() != d+2 || w.Rank() != d+2 || x.Shape().Dim(1) != w.Shape().Dim(1) {
		panic(fmt.Errorf("nn: conv%dd: input %v and kernel %v do not match", d, x.Shape(), w.Shape()))
	}
	stride := max(o.Stride, 1)
	pads := o.Pads
	if pads == nil {
		pads = make([][2]int, d)
		for i := range pads {
			pads[i] = [2]int{o.Padding, o.Padding}
		}
	}
	if len(pads) != d {
		panic(fmt.Errorf("nn: conv%dd: %d pads for %d spatial axes", d, len(pads), d))
	}
	for i := range d {
		if x.Shape().Dim(2+i)+pads[i][0]+pads[i][1] < w.Shape().Dim(2+i) {
			panic(fmt.Errorf("nn: conv%dd: input %v padded by %v is smaller than kernel %v", d, x.Shape(), pads, w.Shape()))
		}
	}
	form := o.Form
	if form == ConvAuto {
		form = ConvFormForGraph(x.Graph())
	}
	if form == ConvFused {
		if y, ok := fusedConv(x, w, b, stride, pads); ok {
			return y
		}
		form = ConvIm2Col
	}
	var y *Node
	switch form {
	case ConvIm2Col:
		y = convIm2Col(x, w, stride, pads)
	case ConvNative:
		y = convNative(x, w, stride, pads)
	case ConvGather:
		y = convGather(x, w, stride, pads)
	default:
		panic(fmt.Errorf("nn: unknown conv form %v", form))
	}
	if b != nil {
		shape := make([]int, y.Rank())
		for i := range shape {
			shape[i] = 1
		}
		shape[1] = b.Shape().Dim(0)
		y = Add(y, Reshape(b, shape...))
	}
	return y
}

// convNative lowers to the backend's ConvGeneral, channels first.
func convNative(x, w *Node, stride int, pads [][2]int) *Node {
	d := x.Rank() - 2
	spatial := make([]int, d)
	strides := make([]int, d)
	for i := range d {
		spatial[i] = 2 + i
		strides[i] = stride
	}
	axes := ConvolveAxesConfig{
		InputBatch: 0, InputChannels: 1, InputSpatial: spatial,
		KernelOutputChannels: 0, KernelInputChannels: 1, KernelSpatial: spatial,
		OutputBatch: 0, OutputChannels: 1, OutputSpatial: spatial,
	}
	return ConvGeneral(x, w, axes, strides, pads, nil, nil, 1, 1)
}

// convIm2Col lowers to Slice/Concatenate + one DotGeneral. With x in channels-last layout
// [N, s..., C], each kernel offset is one strided Slice [N, o..., C]; the K slices are
// stacked into patches [N, o..., K, C] (contiguous runs of C values, cheap to copy) and
// contracted over (K, C) with the kernel transposed to [O, K, C]. The DotGeneral output
// [N, o..., O] is transposed back to channels first.
func convIm2Col(x, w *Node, stride int, pads [][2]int) *Node {
	d := x.Rank() - 2
	xd := x.Shape().Dimensions
	kd := w.Shape().Dimensions
	c, o := xd[1], kd[0]

	// Channels last, zero padded.
	perm := make([]int, d+2)
	perm[0] = 0
	for i := range d {
		perm[1+i] = 2 + i
	}
	perm[d+1] = 1
	h := TransposeAllAxes(x, perm...)
	for i := range d {
		h = padAxis(h, 1+i, pads[i][0], pads[i][1])
	}
	hd := h.Shape().Dimensions

	out := make([]int, d)
	k := 1
	for i := range d {
		out[i] = (hd[1+i]-kd[2+i])/stride + 1
		k *= kd[2+i]
	}

	// One strided slice per kernel offset, in row-major kernel order.
	pieces := make([]*Node, 0, k)
	off := make([]int, d)
	for range k {
		specs := make([]SliceAxisSpec, d+2)
		specs[0] = AxisRange()
		specs[d+1] = AxisRange()
		for i := range d {
			specs[1+i] = AxisRange(off[i], off[i]+(out[i]-1)*stride+1).Stride(stride)
		}
		pieces = append(pieces, Slice(h, specs...))
		for i := d - 1; i >= 0; i-- { // advance the odometer
			off[i]++
			if off[i] < kd[2+i] {
				break
			}
			off[i] = 0
		}
	}
	var patches *Node
	if k == 1 {
		patches = ExpandAxes(pieces[0], d+1)
	} else {
		patches = Stack(pieces, d+1) // [N, o..., K, C]
	}

	// Kernel [O, C, k...] -> [O, k..., C] -> [O, K, C].
	wperm := make([]int, d+2)
	wperm[0] = 0
	for i := range d {
		wperm[1+i] = 2 + i
	}
	wperm[d+1] = 1
	wk := Reshape(TransposeAllAxes(w, wperm...), o, k, c)

	rows := patches.Shape().Size() / (k * c)
	y := MatMulNT(Reshape(patches, rows, k*c), Reshape(wk, o, k*c))
	y = Reshape(y, append(append([]int{xd[0]}, out...), o)...) // [N, o..., O]
	back := make([]int, d+2)
	back[0], back[1] = 0, d+1
	for i := range d {
		back[2+i] = 1 + i
	}
	y = TransposeAllAxes(y, back...)
	return y
}

// padAxis zero-pads x along axis with Concatenate (simplego has no Pad op).
func padAxis(x *Node, axis, before, after int) *Node {
	if before == 0 && after == 0 {
		return x
	}
	if before < 0 || after < 0 {
		panic(fmt.Errorf("nn: negative padding (%d, %d)", before, after))
	}
	parts := make([]*Node, 0, 3)
	zeros := func(size int) *Node {
		dims := x.Shape().Clone().Dimensions
		dims[axis] = size
		return Zeros(x.Graph(), shapes.Make(x.DType(), dims...))
	}
	if before > 0 {
		parts = append(parts, zeros(before))
	}
	parts = append(parts, x)
	if after > 0 {
		parts = append(parts, zeros(after))
	}
	return Concatenate(parts, axis)
}
