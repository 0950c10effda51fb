package sghook

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// sgNode mirrors simplego.Node (GoMLX v0.26): checkLayouts verifies that every field has
// the same name, type and offset before anything is read through it.
type sgNode struct {
	builderIdx         int
	inputs             []*simplego.Node
	opType             backends.OpType
	shape              shapes.Shape
	builder            *simplego.Builder
	multiOutputsShapes []shapes.Shape
	multiOutputsNodes  []*simplego.Node
	isNodeSelectOutput bool
	selectOutputIdx    int
	data               any
}

// sgBuffer mirrors simplego.Buffer.
type sgBuffer struct {
	shape shapes.Shape
	valid bool
	flat  any
}

// sgDotParams mirrors simplego's dotGeneralNodeData, a DotGeneral node's data.
type sgDotParams struct {
	lhsContractingAxes, lhsBatchAxes                       []int
	rhsContractingAxes, rhsBatchAxes                       []int
	batchSize, lhsCrossSize, rhsCrossSize, contractingSize int
	lhsBlockedShape, rhsBlockedShape, outputBlockedShape   shapes.Shape
}

// graphNodeOps is the offset of graph.Node's outputOps field ([]backends.Op).
var graphNodeOps uintptr

func node(n *simplego.Node) *sgNode       { return (*sgNode)(unsafe.Pointer(n)) }
func buffer(b *simplego.Buffer) *sgBuffer { return (*sgBuffer)(unsafe.Pointer(b)) }

// pools returns a simplego backend's buffer pools (its first field; checkLayouts checks
// it). simplego only loads, stores and clears pools by its own key type, so the state of
// Enable is kept there under a key of this package's: it lives and dies with the backend
// (Finalize clears it).
func pools(b *simplego.Backend) *sync.Map { return (*sync.Map)(unsafe.Pointer(b)) }

// dotParams returns a DotGeneral node's parameters (checkLayouts checks the mirror).
func dotParams(n *simplego.Node) (*sgDotParams, bool) {
	v := reflect.ValueOf(node(n).data)
	if v.Kind() != reflect.Pointer || v.Type() != dotParamsType {
		return nil, false
	}
	return (*sgDotParams)(v.UnsafePointer()), true
}

// dotParamsType is the type of a DotGeneral node's data (*dotGeneralNodeData), found by
// checkLayouts.
var dotParamsType reflect.Type

// backendOp returns the simplego node behind a graph node of a simplego graph.
func backendOp(n *graph.Node) (*simplego.Node, error) {
	ops := *(*[]backends.Op)(unsafe.Add(unsafe.Pointer(n), graphNodeOps))
	if len(ops) != 1 {
		return nil, fmt.Errorf("sghook: graph node has %d outputs", len(ops))
	}
	sn, ok := ops[0].(*simplego.Node)
	if !ok {
		return nil, fmt.Errorf("sghook: graph node's op is %T, not a simplego node", ops[0])
	}
	return sn, nil
}

// f32 returns a float32 buffer's data.
func f32(b *simplego.Buffer) ([]float32, bool) {
	s, ok := buffer(b).flat.([]float32)
	return s, ok
}

// checkLayouts compares simplego's Node, Buffer, Backend (its first field) and DotGeneral
// parameters with their mirrors and finds graph.Node's outputOps.
func checkLayouts() error {
	if err := sameLayout(reflect.TypeFor[simplego.Node](), reflect.TypeFor[sgNode]()); err != nil {
		return err
	}
	if err := sameLayout(reflect.TypeFor[simplego.Buffer](), reflect.TypeFor[sgBuffer]()); err != nil {
		return err
	}
	f, ok := reflect.TypeFor[graph.Node]().FieldByName("outputOps")
	if !ok || f.Type != reflect.TypeFor[[]backends.Op]() {
		return fmt.Errorf("sghook: graph.Node has no outputOps []backends.Op field")
	}
	graphNodeOps = f.Offset
	pf := reflect.TypeFor[simplego.Backend]().Field(0)
	if pf.Name != "bufferPools" || pf.Type != reflect.TypeFor[sync.Map]() || pf.Offset != 0 {
		return fmt.Errorf("sghook: simplego.Backend's first field is %s %v at %d, expected bufferPools sync.Map at 0", pf.Name, pf.Type, pf.Offset)
	}
	return checkDotParams()
}

// checkDotParams builds a DotGeneral on a fresh simplego backend and compares its node's
// data with sgDotParams.
func checkDotParams() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sghook: DotGeneral's parameters: %v", r)
		}
	}()
	b, err := simplego.New("")
	if err != nil {
		return err
	}
	defer b.Finalize()
	g := graph.NewGraph(b, "sghook-layout")
	defer g.Finalize()
	x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2, 3))
	sn, err := backendOp(graph.DotGeneral(x, []int{1}, nil, x, []int{1}, nil))
	if err != nil {
		return err
	}
	// simplego's DotGeneral is a node of the normalised product under a Reshape.
	if nd := node(sn); nd.opType == backends.OpTypeReshape && len(nd.inputs) == 1 {
		sn = nd.inputs[0]
	}
	if op := node(sn).opType; op != backends.OpTypeDotGeneral {
		return fmt.Errorf("sghook: DotGeneral built a %v node", op)
	}
	t := reflect.TypeOf(node(sn).data)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("sghook: DotGeneral's node data is %v, not a pointer to a struct", t)
	}
	if err := sameLayout(t.Elem(), reflect.TypeFor[sgDotParams]()); err != nil {
		return err
	}
	dotParamsType = t
	return nil
}

// sameLayout reports how real and mirror differ, if they do.
func sameLayout(real, mirror reflect.Type) error {
	if real.Size() != mirror.Size() || real.NumField() != mirror.NumField() {
		return fmt.Errorf("sghook: %v has %d fields in %d bytes, expected %d in %d",
			real, real.NumField(), real.Size(), mirror.NumField(), mirror.Size())
	}
	for i := range real.NumField() {
		r, m := real.Field(i), mirror.Field(i)
		if r.Name != m.Name || r.Type != m.Type || r.Offset != m.Offset {
			return fmt.Errorf("sghook: %v field %d is %s %v at %d, expected %s %v at %d",
				real, i, r.Name, r.Type, r.Offset, m.Name, m.Type, m.Offset)
		}
	}
	return nil
}
