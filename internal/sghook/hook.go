package sghook

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	_ "unsafe" // go:linkname

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// executor has the type of simplego's nodeExecutor.
type executor func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error)

// nodeExecutors is simplego's table of op executors, indexed by op type.
//
//go:linkname nodeExecutors github.com/gomlx/gomlx/backends/simplego.nodeExecutors
var nodeExecutors [backends.OpTypeLast]executor

// getBufferForShape takes a buffer of the shape from simplego's pool (not zeroed).
//
//go:linkname getBufferForShape github.com/gomlx/gomlx/backends/simplego.(*Backend).getBufferForShape
func getBufferForShape(b *simplego.Backend, shape shapes.Shape) *simplego.Buffer

// Parts selects what Install puts into simplego.
type Parts int

const (
	// GEMM is the matrix-product kernel only (internal/gemm as simplego's float32
	// DotGeneral kernel).
	GEMM Parts = 1 << iota
	// Ops is the float32 executors of elementwise ops and transposes.
	Ops
	// Fused is the fused ops (Emit): attention, normalisations, convolutions.
	Fused

	// All is every part.
	All = GEMM | Ops | Fused
)

var (
	installMu sync.Mutex
	installed Parts // parts in place
	fusedOK   atomic.Bool
)

// Install puts parts into simplego, once each per process; parts already installed are
// kept. It returns an error, and installs nothing more, when what it relies on in GoMLX
// does not look as expected.
func Install(parts Parts) error {
	installMu.Lock()
	defer installMu.Unlock()
	if parts&^installed == 0 {
		return nil
	}
	if installed == 0 {
		if err := checkLayouts(); err != nil {
			return err
		}
		if nodeExecutors[backends.OpTypeIota] == nil || nodeExecutors[backends.OpTypeAdd] == nil {
			return errors.New("sghook: simplego's executor table is not where expected")
		}
	}
	if parts&GEMM != 0 && installed&GEMM == 0 {
		if err := installGEMM(); err != nil {
			return err
		}
		installed |= GEMM
	}
	if parts&Ops != 0 && installed&Ops == 0 {
		installOps()
		installed |= Ops
	}
	if parts&Fused != 0 && installed&Fused == 0 {
		orig := nodeExecutors[backends.OpTypeIota]
		nodeExecutors[backends.OpTypeIota] = func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
			if f, ok := node(n).data.(*fusedOp); ok {
				return f.run(b, n, in, owned)
			}
			return orig(b, n, in, owned)
		}
		installed |= Fused
		fusedOK.Store(true)
		if err := selfTest(); err != nil {
			fusedOK.Store(false)
			nodeExecutors[backends.OpTypeIota] = orig
			installed &^= Fused
			return err
		}
	}
	return nil
}

// Installed reports the parts in place.
func Installed() Parts {
	installMu.Lock()
	defer installMu.Unlock()
	return installed
}

// Kernel is a fused float32 op: Run computes the output from the inputs, all flat in
// row-major order of the shapes given to Emit. Run must write every output element and
// may run on several goroutines; it must give the same bits however it splits its work.
type Kernel interface {
	// Name names the kernel in errors.
	Name() string
	// Run computes out from ins.
	Run(out []float32, ins [][]float32)
}

// BytesKernel is a Kernel that also takes uint8 inputs (a weight held in a compact form,
// carried as its bytes). Emit accepts uint8 input nodes for it, and the op runs RunBytes
// with input i as float32 data (ins[i]) or as bytes (raw[i]), the other nil.
type BytesKernel interface {
	Kernel
	RunBytes(out []float32, ins [][]float32, raw [][]byte)
}

// InPlace is implemented by kernels whose output may overwrite one input (of the
// output's size) when the graph no longer needs it: InPlaceInput returns its index.
type InPlace interface {
	InPlaceInput() int
}

// fusedOp is the data of a fused node.
type fusedOp struct {
	kernel  Kernel
	inPlace int           // -1: none
	inputs  []*graph.Node // the graph nodes given to Emit
}

// FusedOf returns the kernel and the input nodes of a node Emit made in a simplego graph;
// ok is false for any other node. Graph code uses it to see through a node to what
// computes it (a linear layer reading a weight's compact bytes rather than the float32
// values a widening op would make of them).
func FusedOf(n *graph.Node) (k Kernel, inputs []*graph.Node, ok bool) {
	if !fusedOK.Load() {
		return nil, nil, false
	}
	if _, sg := n.Graph().Backend().(*simplego.Backend); !sg {
		return nil, nil, false
	}
	sn, err := backendOp(n)
	if err != nil {
		return nil, nil, false
	}
	f, ok := node(sn).data.(*fusedOp)
	if !ok {
		return nil, nil, false
	}
	return f.kernel, f.inputs, true
}

// Fusable reports whether Emit can be used in g: a simplego graph with fused ops
// installed.
func Fusable(g *graph.Graph) bool {
	if !fusedOK.Load() {
		return false
	}
	_, ok := g.Backend().(*simplego.Backend)
	return ok
}

// Emit adds to g a node of shape out (float32) computed by k from inputs (float32 graph
// nodes, or uint8 ones when k is a BytesKernel), as one op. It panics, as GoMLX's graph
// functions do, if g is not Fusable or an input has another dtype.
func Emit(g *graph.Graph, out shapes.Shape, k Kernel, inputs ...*graph.Node) *graph.Node {
	if !Fusable(g) {
		panic(fmt.Errorf("sghook: %s: fused ops are not installed for this graph's backend", k.Name()))
	}
	if out.DType != dtypes.Float32 {
		panic(fmt.Errorf("sghook: %s: output %v is not float32", k.Name(), out))
	}
	ins := make([]*simplego.Node, len(inputs))
	_, bytesOK := k.(BytesKernel)
	for i, in := range inputs {
		if in.Graph() != g || (in.DType() != dtypes.Float32 && !(bytesOK && in.DType() == dtypes.Uint8)) {
			panic(fmt.Errorf("sghook: %s: input %d (%v) is not a float32 node of this graph", k.Name(), i, in.Shape()))
		}
		sn, err := backendOp(in)
		if err != nil {
			panic(err)
		}
		ins[i] = sn
	}
	n := graph.Iota(g, out, 0)
	sn, err := backendOp(n)
	if err != nil {
		panic(err)
	}
	f := &fusedOp{kernel: k, inPlace: -1, inputs: slices.Clone(inputs)}
	if ip, ok := k.(InPlace); ok {
		if i := ip.InPlaceInput(); i >= 0 && i < len(inputs) && inputs[i].Shape().Size() == out.Size() {
			f.inPlace = i
		}
	}
	m := node(sn)
	m.inputs = ins
	m.data = f
	return n
}

// run executes a fused node.
func (f *fusedOp) run(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	flats := make([][]float32, len(in))
	var raw [][]byte
	for i, buf := range in {
		switch s := buffer(buf).flat.(type) {
		case []float32:
			flats[i] = s
		case []uint8:
			if raw == nil {
				raw = make([][]byte, len(in))
			}
			raw[i] = s
		default:
			return nil, fmt.Errorf("sghook: %s: input %d is %v, not float32", f.kernel.Name(), i, buffer(buf).shape)
		}
	}
	shape := node(n).shape
	var out *simplego.Buffer
	if i := f.inPlace; i >= 0 && owned[i] {
		out = in[i]
		in[i] = nil // simplego's convention: the input buffer now belongs to the output
		buffer(out).shape = shape
	} else {
		out = getBufferForShape(b, shape)
	}
	o, _ := f32(out)
	if bk, ok := f.kernel.(BytesKernel); ok && raw != nil {
		bk.RunBytes(o[:shape.Size()], flats, raw)
		return out, nil
	}
	if raw != nil {
		return nil, fmt.Errorf("sghook: %s: uint8 input for a float32 kernel", f.kernel.Name())
	}
	f.kernel.Run(o[:shape.Size()], flats)
	return out, nil
}
