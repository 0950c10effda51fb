package nn

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/kernels"
	"github.com/vdpp/vdpp/internal/parallel"
	"github.com/vdpp/vdpp/internal/qgemm"
	"github.com/vdpp/vdpp/internal/sghook"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// StoredTensor is one tensor as a file stores it (checkpoint.Stored.EachStored hands them
// over): its shape, its weight type and its bytes in that type's layout. Data is read,
// never kept.
type StoredTensor = checkpoint.StoredTensor

// HoldFunc returns the weight type nn holds a tensor in, given its name, shape and stored
// type. Returning F32 widens it at load; any other type must fit the tensor's rows (the
// last axis) with whole blocks.
type HoldFunc func(name string, shape []int, stored quant.Type) quant.Type

// HoldAsStored holds every weight matrix (a ".weight" tensor of rank 2 or more) in the type
// its file stores and everything else (norms, biases, tables) in float32.
func HoldAsStored(name string, shape []int, stored quant.Type) quant.Type {
	if !isMatrix(name, shape) {
		return quant.F32
	}
	return stored
}

// HoldAs returns the HoldFunc that converts the weight matrices to type t at load, as
// stable-diffusion.cpp's --type does: a matrix whose rows do not fit t's blocks takes t's
// fallback (quant.Type.Fallback: the nearest type that fits, or its stored type); the
// matrices of embeddings (a name with "embed": timestep, text, patch and position
// embeddings, which stable-diffusion.cpp does not convert either) keep their stored type;
// everything else is float32.
func HoldAs(t quant.Type) HoldFunc {
	return func(name string, shape []int, stored quant.Type) quant.Type {
		switch {
		case !isMatrix(name, shape):
			return quant.F32
		case strings.Contains(name, "embed"):
			return HoldAsStored(name, shape, stored)
		}
		return t.Fallback(shape[len(shape)-1], stored)
	}
}

// HoldMix returns the HoldFunc that converts the weight matrices at load as the GGUF
// quantizer of mix m makes a file of that type: each 2-D matrix takes m.Type of its name
// and rows; a convolution (3-D or more, which ComfyUI-GGUF's quantizer leaves as its
// converter wrote it) is f16; the matrices of embeddings keep their stored type, as HoldAs
// keeps them; everything else is float32.
func HoldMix(m quant.Mix) HoldFunc {
	return func(name string, shape []int, stored quant.Type) quant.Type {
		switch {
		case !isMatrix(name, shape):
			return quant.F32
		case strings.Contains(name, "embed"):
			return HoldAsStored(name, shape, stored)
		case len(shape) > 2:
			return quant.F16
		}
		return m.Type(name, shape[1])
	}
}

// isMatrix reports whether a tensor is a linear or convolution weight: named ".weight",
// of rank 2 or more.
func isMatrix(name string, shape []int) bool {
	return len(shape) >= 2 && strings.HasSuffix(name, ".weight")
}

// heldForm is how a compact tensor's bytes are laid out.
type heldForm int

const (
	halfPanels  heldForm = iota // f16/bf16 matrix [N, K] in gemm's half panels
	quantPanels                 // block-quantized matrix [N, K] in qgemm's panels
	storedRows                  // the stored layout: [N] rows of K values (blocks along the last axis)
	dtypeHalf                   // f16/bf16 as a GoMLX tensor of that dtype, in the tensor's shape (no kernels)
)

// heldWeight describes a tensor held in a compact type: a matrix W [n, k], n its first
// axis and k the product of the others.
type heldWeight struct {
	typ   quant.Type
	shape []int
	n, k  int
	form  heldForm
	size  int // bytes
}

// newHeld chooses the form for a tensor of shape held in t.
func newHeld(shape []int, t quant.Type) (*heldWeight, error) {
	h := &heldWeight{typ: t, shape: slices.Clone(shape), n: shape[0], k: tensor.NumElements(shape[1:])}
	var err error
	switch {
	case len(shape) == 2 && (t == quant.F16 || t == quant.BF16):
		h.form, h.size = halfPanels, 2*gemm.HalfPackedLen(h.n, h.k)
	case len(shape) == 2 && qgemm.Supported(qgemm.Type(t)):
		h.form = quantPanels
		h.size, err = qgemm.PackedLen(qgemm.Type(t), h.n, h.k)
	default:
		h.form = storedRows
		var rb int
		if rb, err = t.RowBytes(shape[len(shape)-1]); err == nil {
			h.size = h.n * h.k / shape[len(shape)-1] * rb
		}
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (h *heldWeight) half() gemm.Half {
	if h.typ == quant.BF16 {
		return gemm.BF16
	}
	return gemm.F16
}

// halves views aligned bytes (a backend buffer, or memory Go allocated) as uint16.
func halves(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// matrix returns the weight for the products, reading raw (the held bytes) in place.
func (h *heldWeight) matrix(raw []byte) kernels.Matrix {
	switch h.form {
	case halfPanels:
		return kernels.Matrix{Half: h.half(), Halfs: halves(raw)}
	case quantPanels:
		return kernels.Matrix{Quant: &qgemm.Weights{Type: qgemm.Type(h.typ), N: h.n, K: h.k, Data: raw}}
	}
	return kernels.Matrix{Rows: storedDecoder{h, raw}}
}

// storedDecoder widens rows of a tensor held in its stored layout.
type storedDecoder struct {
	h   *heldWeight
	raw []byte
}

func (d storedDecoder) DecodeRows(j0, j1 int, dst []float32) {
	per := d.h.size / d.h.n
	if err := quant.Dequantize(d.h.typ, d.raw[j0*per:j1*per], dst[:(j1-j0)*d.h.k]); err != nil {
		panic(fmt.Errorf("nn: widening %v rows: %w", d.h.typ, err))
	}
}

// heldRows widens rows of a held tensor (any form): a kernels.RowDecoder.
type heldRows struct {
	h   *heldWeight
	raw []byte
}

func (r heldRows) DecodeRows(j0, j1 int, dst []float32) { r.h.decodeRows(r.raw, j0, j1, dst) }

// decodeRows widens rows j0..j1−1 of the held tensor into dst.
func (h *heldWeight) decodeRows(raw []byte, j0, j1 int, dst []float32) {
	switch h.form {
	case halfPanels:
		const w = gemm.HalfPanelWidth
		u, f := halves(raw), h.half()
		for j := j0; j < j1; j++ {
			panel := u[j/w*w*h.k:]
			row := dst[(j-j0)*h.k : (j-j0+1)*h.k]
			for p := range row {
				row[p] = f.ToFloat32(panel[p*w+j%w])
			}
		}
	case quantPanels:
		h.matrix(raw).Quant.DequantizeRows(j0, j1, dst)
	default:
		storedDecoder{h, raw}.DecodeRows(j0, j1, dst)
	}
}

// widenKernel is the fused op that widens a held tensor to float32 (its bytes the one
// input): what Param returns for a held tensor, so that any op may use it. The fused
// linear layer never runs it: it reads the bytes (see fusedLinear).
type widenKernel struct{ h *heldWeight }

func (widenKernel) Name() string { return "widen weight" }
func (widenKernel) Run([]float32, [][]float32) {
	panic("nn: widen weight: run without its bytes")
}
func (k widenKernel) RunBytes(out []float32, _ [][]float32, raw [][]byte) {
	if widenHook != nil {
		widenHook()
	}
	parallel.For(k.h.n, max(1, 1<<16/k.h.k), func(lo, hi int) {
		k.h.decodeRows(raw[0], lo, hi, out[lo*k.h.k:hi*k.h.k])
	})
}

// widenHook, when set (by tests), is called each time a widening op runs.
var widenHook func()

// heldParam returns the float32 node of a held tensor: a half tensor converted where the
// graph uses it (on a backend without vdpp's kernels; XLA may fuse the conversion into
// the product), or the bytes of a compact one widened by a fused op.
func heldParam(g *graph.Graph, name string, h *heldWeight, bytes *graph.Node) *graph.Node {
	if h.form == dtypeHalf {
		return graph.ConvertDType(bytes, dtypes.Float32)
	}
	if !UsesKernels(g.Backend()) {
		panic(fmt.Errorf("nn: %q is held as %v, which only vdpp's CPU kernels read", name, h.typ))
	}
	return sghook.Emit(g, shapes.Make(dtypes.Float32, h.shape...), widenKernel{h}, bytes)
}

// heldOf returns the held tensor behind w and its bytes node when w is Param's widening of
// a held tensor, or a reshape of it that keeps the first axis (a convolution kernel used as
// a matrix [O, C·k...], which is how the held rows are laid out).
func heldOf(w *graph.Node) (*heldWeight, *graph.Node, bool) {
	if w.Type() == graph.NodeTypeReshape && w.Rank() >= 1 && len(w.Inputs()) == 1 {
		in := w.Inputs()[0]
		if h, bytes, ok := heldOf(in); ok && in.Rank() >= 1 && w.Shape().Dim(0) == in.Shape().Dim(0) && h.form == storedRows {
			return h, bytes, true
		}
		return nil, nil, false
	}
	k, ins, ok := sghook.FusedOf(w)
	if !ok {
		return nil, nil, false
	}
	wk, ok := k.(widenKernel)
	if !ok {
		return nil, nil, false
	}
	return wk.h, ins[0], true
}

// NewWeightsHeld is NewWeightsStream for tensors as stored: load calls add with each tensor
// in its stored type, and hold says the type to keep it in; the backend's Holding says
// what it can keep. On a backend that runs vdpp's CPU kernels (UsesKernels) a tensor held
// in a compact type is kept in it, in the layout the kernels read, and never exists in
// float32 as a whole (linear layers read it as held; any other use widens it for that op
// only). Elsewhere (XLA, kernels off) a tensor held in bf16 or f16 is a GoMLX tensor of
// that dtype where the backend has it (Holding), converted to float32 in the graph where
// it is used, so a call computes exactly what the float32 call on the half-rounded
// weights computes; any other tensor is held in float32: its stored values widened at
// load (a block type asked by hold is not applied there). A conversion goes one row at a
// time through float32 (quant.Dequantize, then quant.Quantize: ggml's reference code), so
// besides the held bytes only one tensor's bytes in the held type exist at once.
func NewWeightsHeld(b backends.Backend, hold HoldFunc, load func(add func(name string, t StoredTensor) error) error) (*Weights, error) {
	w := &Weights{backend: b, ctx: newContext(), shapes: map[string][]int{}, held: map[string]*heldWeight{}, types: map[quant.Type]int64{}}
	holding := HoldingOf(b)
	err := load(func(name string, t StoredTensor) error {
		if err := w.checkName(name); err != nil {
			return err
		}
		n := tensor.NumElements(t.Shape)
		if len(t.Shape) == 0 || n == 0 {
			return w.addStoredF32(name, t)
		}
		if want, err := t.Type.Bytes(n, t.Shape[len(t.Shape)-1]); err != nil || want != int64(len(t.Data)) {
			return fmt.Errorf("nn: tensor %q: %d bytes of %v for shape %v", name, len(t.Data), t.Type, t.Shape)
		}
		switch ht := holding.Type(hold(name, t.Shape, t.Type)); {
		case ht == quant.F32:
			return w.addStoredF32(name, t)
		case !holding.Kernels:
			return w.addHalf(name, t, ht)
		default:
			return w.addHeld(name, t, ht)
		}
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// addStoredF32 widens a stored tensor and uploads it as float32.
func (w *Weights) addStoredF32(name string, t StoredTensor) error {
	d := tensor.New(t.Shape...)
	if len(d.Data) > 0 {
		if err := convertRows(t.Type, t.Data, quant.F32, nil, d.Data, t.Shape); err != nil {
			return fmt.Errorf("nn: tensor %q: %w", name, err)
		}
	}
	return w.add(name, d)
}

// convertRows converts src (type from, rows along the last axis of shape) to type to:
// into dst bytes, or into f32 when to is F32 and f32 is given. Rows are converted on the
// cores, each through a float32 row.
func convertRows(from quant.Type, src []byte, to quant.Type, dst []byte, f32 []float32, shape []int) error {
	row := shape[len(shape)-1]
	rows := tensor.NumElements(shape) / row
	sb, err := from.RowBytes(row)
	if err != nil {
		return err
	}
	db := 0
	if f32 == nil {
		if db, err = to.RowBytes(row); err != nil {
			return err
		}
	}
	errs := make([]error, rows)
	grain := max(1, 1<<14/row)
	if to.Quantized() {
		grain = 1 // the k-quants' quantizers search: a row is a lot of work
	}
	parallel.For(rows, grain, func(lo, hi int) {
		var buf []float32
		if f32 == nil {
			buf = make([]float32, row)
		}
		for r := lo; r < hi; r++ {
			x := buf
			if f32 != nil {
				x = f32[r*row : (r+1)*row]
			}
			if errs[r] = quant.Dequantize(from, src[r*sb:(r+1)*sb], x); errs[r] != nil {
				return
			}
			if f32 == nil {
				if errs[r] = quant.QuantizeTo(to, dst[r*db:(r+1)*db], x); errs[r] != nil {
					return
				}
			}
		}
	})
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// addHeld keeps a tensor in type ht: converted (when stored otherwise), laid out for the
// kernels, in a backend buffer.
func (w *Weights) addHeld(name string, t StoredTensor, ht quant.Type) error {
	h, err := newHeld(t.Shape, ht)
	if err != nil {
		return fmt.Errorf("nn: tensor %q %v held as %v: %w", name, t.Shape, ht, err)
	}
	src := t.Data
	if t.Type != ht {
		n := tensor.NumElements(t.Shape)
		size, err := ht.Bytes(n, t.Shape[len(t.Shape)-1])
		if err != nil {
			return fmt.Errorf("nn: tensor %q %v held as %v: %w", name, t.Shape, ht, err)
		}
		src = make([]byte, size)
		if err := convertRows(t.Type, t.Data, ht, src, nil, t.Shape); err != nil {
			return fmt.Errorf("nn: tensor %q: %v to %v: %w", name, t.Type, ht, err)
		}
	}
	buf, flat, err := w.backend.NewSharedBuffer(0, shapes.Make(dtypes.Uint8, h.size))
	if err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	raw := flat.([]uint8)
	switch h.form {
	case halfPanels:
		packHalfBytes(halves(raw), h.n, h.k, src)
	case quantPanels:
		if _, err := qgemm.PackInto(raw, qgemm.Type(ht), h.n, h.k, src); err != nil {
			return fmt.Errorf("nn: tensor %q: %w", name, err)
		}
	default:
		copy(raw, src)
	}
	v, err := tensors.FromBuffer(w.backend, buf)
	if err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	if err := catch(func() { w.ctx.VariableWithValue(name, v).SetTrainable(false) }); err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	w.shapes[name] = slices.Clone(t.Shape)
	w.held[name] = h
	w.bytes += int64(h.size)
	w.types[ht] += int64(h.size)
	return nil
}

// addHalf keeps a tensor in the half type ht (bf16 or f16) as a backend tensor of that
// GoMLX dtype, in its own shape: converted (when stored otherwise) straight into the
// backend's buffer where the backend shares its buffers with Go, else into one host copy.
func (w *Weights) addHalf(name string, t StoredTensor, ht quant.Type) error {
	n := tensor.NumElements(t.Shape)
	sh := shapes.Make(halfDType(ht), t.Shape...)
	var buf backends.Buffer
	var flat reflect.Value
	var err error
	if w.backend.HasSharedBuffers() {
		var f any
		if buf, f, err = w.backend.NewSharedBuffer(0, sh); err != nil {
			return fmt.Errorf("nn: tensor %q: %w", name, err)
		}
		flat = reflect.ValueOf(f)
	} else {
		flat = reflect.MakeSlice(reflect.SliceOf(sh.DType.GoType()), n, n)
	}
	raw := unsafe.Slice((*byte)(flat.UnsafePointer()), 2*n)
	if t.Type == ht {
		copy(raw, t.Data)
	} else if err := convertRows(t.Type, t.Data, ht, raw, nil, t.Shape); err != nil {
		return fmt.Errorf("nn: tensor %q: %v to %v: %w", name, t.Type, ht, err)
	}
	if buf == nil {
		if buf, err = w.backend.BufferFromFlatData(0, flat.Interface(), sh); err != nil {
			return fmt.Errorf("nn: tensor %q: %w", name, err)
		}
	}
	v, err := tensors.FromBuffer(w.backend, buf)
	if err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	if err := catch(func() { w.ctx.VariableWithValue(name, v).SetTrainable(false) }); err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	h := &heldWeight{typ: ht, shape: slices.Clone(t.Shape), n: t.Shape[0], k: n / t.Shape[0], form: dtypeHalf, size: 2 * n}
	w.shapes[name] = slices.Clone(t.Shape)
	w.held[name] = h
	w.bytes += int64(h.size)
	w.types[ht] += int64(h.size)
	return nil
}

// packHalfBytes is gemm.PackHalfRows reading the n rows of k little-endian half values
// from bytes (which a memory-mapped file need not align).
func packHalfBytes(dst []uint16, n, k int, src []byte) {
	const w = gemm.HalfPanelWidth
	parallel.For((n+w-1)/w, 1, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			panel := dst[q*w*k : (q+1)*w*k]
			cols := min(w, n-q*w)
			if cols < w {
				clear(panel)
			}
			for j := range cols {
				row := src[2*(q*w+j)*k : 2*(q*w+j+1)*k]
				for p := range k {
					panel[p*w+j] = binary.LittleEndian.Uint16(row[2*p:])
				}
			}
		}
	})
}

// HeldBytes returns the bytes Weights holds for each weight type (float32 included).
func (w *Weights) HeldBytes() map[quant.Type]int64 {
	out := make(map[quant.Type]int64, len(w.types))
	for t, n := range w.types {
		out[t] = n
	}
	return out
}

// Held returns the type tensor name is held in (F32 for a float32 tensor); ok is false
// when the weights have no such tensor.
func (w *Weights) Held(name string) (t quant.Type, ok bool) {
	if _, ok := w.shapes[name]; !ok {
		return 0, false
	}
	if h := w.held[name]; h != nil {
		return h.typ, true
	}
	return quant.F32, true
}

// NewWeightsHeldDense is NewWeightsHeld for float32 tensors in memory (random or computed
// weights): each is handed as stored in f32, in name order.
func NewWeightsHeldDense(b backends.Backend, hold HoldFunc, ts map[string]*tensor.Dense) (*Weights, error) {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	slices.Sort(names)
	return NewWeightsHeld(b, hold, func(add func(string, StoredTensor) error) error {
		for _, n := range names {
			d := ts[n]
			if d == nil || len(d.Data) != tensor.NumElements(d.Shape) {
				return fmt.Errorf("nn: tensor %q: data does not match its shape", n)
			}
			raw := make([]byte, 4*len(d.Data))
			for i, v := range d.Data {
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
			}
			if err := add(n, StoredTensor{Shape: d.Shape, Type: quant.F32, Data: raw}); err != nil {
				return err
			}
		}
		return nil
	})
}
