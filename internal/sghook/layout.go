package sghook

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
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

// graphNodeOps is the offset of graph.Node's outputOps field ([]backends.Op).
var graphNodeOps uintptr

func node(n *simplego.Node) *sgNode       { return (*sgNode)(unsafe.Pointer(n)) }
func buffer(b *simplego.Buffer) *sgBuffer { return (*sgBuffer)(unsafe.Pointer(b)) }

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

// checkLayouts compares simplego's Node and Buffer with their mirrors and finds graph.Node's
// outputOps.
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
