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

// putBuffer returns a buffer to simplego's pool.
//
//go:linkname putBuffer github.com/gomlx/gomlx/backends/simplego.(*Backend).putBuffer
func putBuffer(b *simplego.Backend, buf *simplego.Buffer)

// Parts selects what a backend runs of vdpp's kernels.
type Parts int

const (
	// GEMM is the float32 matrix product on internal/gemm.
	GEMM Parts = 1 << iota
	// Ops is the float32 executors of elementwise ops and transposes.
	Ops
	// Fused is the fused ops (Emit) in inference graphs.
	Fused

	// All is every part.
	All = GEMM | Ops | Fused
)

var (
	installOnce sync.Once
	installErr  error
)

// Install puts vdpp's executors into simplego, once per process; they stay inert for every
// backend until Enable names it. It returns an error, and installs nothing, when what it
// relies on in GoMLX does not look as expected; the error is kept for later calls.
func Install() error {
	installOnce.Do(func() { installErr = install() })
	return installErr
}

func install() error {
	if err := checkLayouts(); err != nil {
		return err
	}
	for _, op := range []backends.OpType{backends.OpTypeIota, backends.OpTypeDotGeneral, backends.OpTypeAdd,
		backends.OpTypeTranspose, backends.OpTypeExp} {
		if nodeExecutors[op] == nil {
			return errors.New("sghook: simplego's executor table is not where expected")
		}
	}
	saved := nodeExecutors
	installDot()
	installOps()
	origIota := nodeExecutors[backends.OpTypeIota]
	nodeExecutors[backends.OpTypeIota] = func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
		if f, ok := node(n).data.(*fusedOp); ok {
			return f.run(b, n, in, owned)
		}
		return origIota(b, n, in, owned)
	}
	if err := selfTest(); err != nil {
		nodeExecutors = saved
		return err
	}
	return nil
}

// state is what a simplego backend records of vdpp's kernels: the parts it runs, the
// graphs being built as inference graphs, and how often each fused op ran.
type state struct {
	parts atomic.Int32 // Parts

	mu        sync.Mutex
	inference map[*graph.Graph]int // graph -> nesting depth of Inference calls

	ran sync.Map // kernel name -> *atomic.Int64
}

// stateKey is the key of a backend's state in its buffer pools (see pools).
type stateKey struct{}

// stateOf returns b's state, nil when it has none.
func stateOf(b *simplego.Backend) *state {
	v, ok := pools(b).Load(stateKey{})
	if !ok {
		return nil
	}
	return v.(*state)
}

// stateFor returns b's state, making an empty one if it has none.
func stateFor(b *simplego.Backend) *state {
	if st := stateOf(b); st != nil {
		return st
	}
	v, _ := pools(b).LoadOrStore(stateKey{}, &state{inference: map[*graph.Graph]int{}})
	return v.(*state)
}

// runs reports whether backend b runs part p.
func runs(b *simplego.Backend, p Parts) bool {
	st := stateOf(b)
	return st != nil && Parts(st.parts.Load())&p != 0
}

// Enable makes the simplego backend b run parts (installing the executors first, see
// Install), replacing what it ran before. Enable(b, 0) leaves b on simplego's own code.
func Enable(b backends.Backend, parts Parts) error {
	sb, ok := b.(*simplego.Backend)
	if !ok {
		return fmt.Errorf("sghook: %s is not GoMLX's simplego backend", b.Name())
	}
	if parts != 0 {
		if err := Install(); err != nil {
			return err
		}
	}
	stateFor(sb).parts.Store(int32(parts))
	return nil
}

// Enabled reports the parts backend b runs: 0 for a backend that is not simplego or that
// Enable never named.
func Enabled(b backends.Backend) Parts {
	sb, ok := b.(*simplego.Backend)
	if !ok {
		return 0
	}
	if st := stateOf(sb); st != nil {
		return Parts(st.parts.Load())
	}
	return 0
}

// Inference runs build with g marked as an inference graph (whose gradient is never
// taken): Emit adds fused ops only to a graph while it is marked. On a backend other than
// simplego it just runs build.
func Inference(g *graph.Graph, build func()) {
	sb, ok := g.Backend().(*simplego.Backend)
	if !ok {
		build()
		return
	}
	st := stateFor(sb)
	st.mu.Lock()
	st.inference[g]++
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		if st.inference[g]--; st.inference[g] <= 0 {
			delete(st.inference, g)
		}
		st.mu.Unlock()
	}()
	build()
}

// IsInference reports whether g is being built inside Inference (always false on a
// backend other than simplego).
func IsInference(g *graph.Graph) bool {
	sb, ok := g.Backend().(*simplego.Backend)
	if !ok {
		return false
	}
	st := stateOf(sb)
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.inference[g] > 0
}

// Fusable reports whether Emit may add any fused op to g now: g is an inference graph
// being built on a simplego backend that runs Fused.
func Fusable(g *graph.Graph) bool {
	return Enabled(g.Backend())&Fused != 0 && IsInference(g)
}

// Ran returns how many times each fused op (by Kernel.Name) ran on backend b.
func Ran(b backends.Backend) map[string]int64 {
	out := map[string]int64{}
	sb, ok := b.(*simplego.Backend)
	if !ok {
		return out
	}
	if st := stateOf(sb); st != nil {
		st.ran.Range(func(k, v any) bool {
			out[k.(string)] = v.(*atomic.Int64).Load()
			return true
		})
	}
	return out
}

// Kernel is a fused op: Run computes the output (float32, flat in row-major order of the
// shape given to Emit) from the float32 inputs, in the order given to Emit. Run must write
// every output element and may run on several goroutines; it must give the same bits
// however it splits its work.
type Kernel interface {
	// Name names the kernel in errors and in Ran.
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

// InPlace is implemented by kernels whose output may overwrite one input (float32, of the
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
	if _, sg := n.Graph().Backend().(*simplego.Backend); !sg || Install() != nil {
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

// Emit adds to g a node of shape out (float32) computed by k from inputs (float32 graph
// nodes of g, or uint8 ones when k is a BytesKernel), as one op. g's backend must run
// Fused, and g must be Fusable unless every input is uint8: a fused op has no gradient,
// which only an op of bytes (a compact weight widened, nothing to differentiate) may lack in
// a graph whose gradient may be taken. It panics, as GoMLX's graph functions do, otherwise
// or if an input has another dtype.
func Emit(g *graph.Graph, out shapes.Shape, k Kernel, inputs ...*graph.Node) *graph.Node {
	if Enabled(g.Backend())&Fused == 0 {
		panic(fmt.Errorf("sghook: %s: graph %q: its backend does not run fused ops", k.Name(), g.Name()))
	}
	if !IsInference(g) {
		for i, in := range inputs {
			if in.DType() != dtypes.Uint8 {
				panic(fmt.Errorf("sghook: %s: graph %q is not an inference graph, and input %d is %v: its gradient would be lost", k.Name(), g.Name(), i, in.DType()))
			}
		}
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
		if i := ip.InPlaceInput(); i >= 0 && i < len(inputs) && inputs[i].DType() == dtypes.Float32 && inputs[i].Shape().Size() == out.Size() {
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
	bk, bytesOK := f.kernel.(BytesKernel)
	if raw != nil && !bytesOK {
		return nil, fmt.Errorf("sghook: %s: uint8 input for a float32 kernel", f.kernel.Name())
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
	if raw != nil {
		bk.RunBytes(o[:shape.Size()], flats, raw)
	} else {
		f.kernel.Run(o[:shape.Size()], flats)
	}
	if st := stateOf(b); st != nil {
		c, ok := st.ran.Load(f.kernel.Name())
		if !ok {
			c, _ = st.ran.LoadOrStore(f.kernel.Name(), new(atomic.Int64))
		}
		c.(*atomic.Int64).Add(1)
	}
	return out, nil
}
