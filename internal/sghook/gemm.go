package sghook

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/vdpp/vdpp/internal/gemm"
)

// simpleGoNormalizedDot is simplego's table of "normalised" DotGeneral kernels, one per
// dtype: the function that multiplies lhs [batch, m, k] by rhs [batch, n, k] into
// [batch, m, n] for a range of the batch.
//
//go:linkname simpleGoNormalizedDot github.com/gomlx/gomlx/backends/simplego.dotGeneralNormalizedDTypeMap
var simpleGoNormalizedDot *simplego.DTypeMap

// installGEMM replaces simplego's float32 normalised DotGeneral kernel with internal/gemm.
func installGEMM() error {
	fn, err := gemmKernelFor(simpleGoNormalizedDot.Map[dtypes.Float32])
	if err != nil {
		return fmt.Errorf("sghook: keeping simplego's matrix product: %w", err)
	}
	simpleGoNormalizedDot.Map[dtypes.Float32] = fn
	return nil
}

// gemmKernelFor returns a function of the same type as simplego's kernel orig,
// func(lhs, rhs, output *Buffer, params *dotGeneralNodeData, batchStart, batchEnd int),
// that runs gemm.MulNT over the batch range. The parameter struct is unexported, so the
// function is made by reflection and reads the sizes by field name.
func gemmKernelFor(orig any) (any, error) {
	ft := reflect.TypeOf(orig)
	if ft == nil || ft.Kind() != reflect.Func || ft.NumIn() != 6 || ft.NumOut() != 0 {
		return nil, fmt.Errorf("unexpected kernel type %v", ft)
	}
	bufType := reflect.TypeFor[*simplego.Buffer]()
	for i := range 3 {
		if ft.In(i) != bufType {
			return nil, fmt.Errorf("kernel argument %d is %v, not %v", i, ft.In(i), bufType)
		}
	}
	if ft.In(4).Kind() != reflect.Int || ft.In(5).Kind() != reflect.Int ||
		ft.In(3).Kind() != reflect.Pointer || ft.In(3).Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("unexpected kernel type %v", ft)
	}
	sizes := map[string]uintptr{}
	for _, name := range []string{"lhsCrossSize", "rhsCrossSize", "contractingSize"} {
		f, ok := ft.In(3).Elem().FieldByName(name)
		if !ok || f.Type.Kind() != reflect.Int || len(f.Index) != 1 {
			return nil, fmt.Errorf("kernel parameters have no int field %s", name)
		}
		sizes[name] = f.Offset
	}
	mOff, nOff, kOff := sizes["lhsCrossSize"], sizes["rhsCrossSize"], sizes["contractingSize"]
	data := func(v reflect.Value) []float32 {
		s, ok := f32((*simplego.Buffer)(v.UnsafePointer()))
		if !ok {
			panic(fmt.Sprintf("sghook: float32 DotGeneral got %T data", buffer((*simplego.Buffer)(v.UnsafePointer())).flat))
		}
		return s
	}
	return reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
		lhs, rhs, out := data(args[0]), data(args[1]), data(args[2])
		p := args[3].UnsafePointer()
		m := *(*int)(unsafe.Add(p, mOff))
		n := *(*int)(unsafe.Add(p, nOff))
		k := *(*int)(unsafe.Add(p, kOff))
		for b := int(args[4].Int()); b < int(args[5].Int()); b++ {
			gemm.MulNT(m, n, k, lhs[b*m*k:(b+1)*m*k], rhs[b*n*k:(b+1)*n*k], out[b*m*n:(b+1)*m*n])
		}
		return nil
	}).Interface(), nil
}
