package nn

import (
	"fmt"
	"os"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/vdpp/vdpp/internal/gemm"
)

// simpleGoNormalizedDot is simplego's table of "normalised" DotGeneral kernels, one per
// dtype: the function that multiplies lhs [batch, m, k] by rhs [batch, n, k] into
// [batch, m, n] for a range of the batch. GoMLX v0.26 has no public way to supply a faster
// matrix product (later versions ship a SIMD one), and its float32 entry is a scalar loop
// at about 1 GFLOP/s, most of a built-in video's time. vdpp replaces that one entry with
// internal/gemm (installSimpleGoGEMM); the version is pinned in go.mod, and the
// installation checks the function's signature and the fields it reads by reflection, so
// a GoMLX change that breaks the assumptions leaves simplego's kernel in place instead of
// misbehaving.
//
//go:linkname simpleGoNormalizedDot github.com/gomlx/gomlx/backends/simplego.dotGeneralNormalizedDTypeMap
var simpleGoNormalizedDot *simplego.DTypeMap

// GEMMEnv names the environment variable that keeps simplego's own matrix product
// ("VDPP_GEMM=simplego"), for comparisons.
const GEMMEnv = "VDPP_GEMM"

var (
	gemmOnce      sync.Once
	gemmInstalled bool
	gemmErr       error
)

// SimpleGoGEMM reports whether simplego's float32 matrix products run on internal/gemm's
// kernel in this process, and if not, why not (nil when it was turned off on purpose).
// The kernel is installed when the first simplego backend is created.
func SimpleGoGEMM() (bool, error) {
	installSimpleGoGEMM()
	return gemmInstalled, gemmErr
}

// installSimpleGoGEMM installs internal/gemm as simplego's float32 normalised DotGeneral,
// once per process, when the CPU has the assembly kernel and VDPP_GEMM is not "simplego".
func installSimpleGoGEMM() {
	gemmOnce.Do(func() {
		if os.Getenv(GEMMEnv) == "simplego" || !gemm.Accelerated() {
			return
		}
		fn, err := gemmKernelFor(simpleGoNormalizedDot.Map[dtypes.Float32])
		if err != nil {
			gemmErr = fmt.Errorf("nn: keeping simplego's matrix product: %w", err)
			return
		}
		simpleGoNormalizedDot.Map[dtypes.Float32] = fn
		gemmInstalled = true
	})
}

// gemmKernelFor returns a function of the same type as simplego's kernel orig,
// func(lhs, rhs, output *Buffer, params *dotGeneralNodeData, batchStart, batchEnd int),
// that runs gemm.MulNT over the batch range. The parameter struct is unexported, so the
// function is made by reflection and reads the buffers' flat data and the sizes by field
// name.
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
	flat, ok := bufType.Elem().FieldByName("flat")
	if !ok || flat.Type.Kind() != reflect.Interface {
		return nil, fmt.Errorf("simplego.Buffer has no flat data field")
	}
	sizes := map[string]int{}
	for _, name := range []string{"lhsCrossSize", "rhsCrossSize", "contractingSize"} {
		f, ok := ft.In(3).Elem().FieldByName(name)
		if !ok || f.Type.Kind() != reflect.Int {
			return nil, fmt.Errorf("kernel parameters have no int field %s", name)
		}
		sizes[name] = f.Index[0]
	}
	mIdx, nIdx, kIdx := sizes["lhsCrossSize"], sizes["rhsCrossSize"], sizes["contractingSize"]
	f32 := func(buf reflect.Value) []float32 {
		s := buf.Elem().Field(flat.Index[0]).Elem()
		if s.Type() != reflect.TypeFor[[]float32]() {
			panic(fmt.Sprintf("nn: float32 DotGeneral got %v data", s.Type()))
		}
		return unsafe.Slice((*float32)(s.UnsafePointer()), s.Len())
	}
	return reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
		lhs, rhs, out := f32(args[0]), f32(args[1]), f32(args[2])
		p := args[3].Elem()
		m, n, k := int(p.Field(mIdx).Int()), int(p.Field(nIdx).Int()), int(p.Field(kIdx).Int())
		for b := int(args[4].Int()); b < int(args[5].Int()); b++ {
			gemm.MulNT(m, n, k, lhs[b*m*k:(b+1)*m*k], rhs[b*n*k:(b+1)*n*k], out[b*m*n:(b+1)*m*n])
		}
		return nil
	}).Interface(), nil
}
