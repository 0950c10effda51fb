package train

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// ErrCheckpoint is returned for a checkpoint file that cannot be restored.
var ErrCheckpoint = errors.New("train: bad checkpoint")

// keySep separates a variable's scope from its name in checkpoint tensor names.
const keySep = "::"

// newContext returns a context holding weights as trainable float32 variables at the root
// scope, named by their diffusers names (the layout nn.ContextScope reads).
func newContext(weights map[string]*tensor.Dense) *context.Context {
	ctx := context.New()
	names := make([]string, 0, len(weights))
	for n := range weights {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w := weights[n]
		t := tensors.FromFlatDataAndDimensions(append([]float32(nil), w.Data...), w.Shape...)
		ctx.VariableWithValue(n, t).SetTrainable(true)
	}
	return ctx
}

// modelWeights copies the root-scope (model) variables of ctx to host tensors.
func modelWeights(ctx *context.Context) (map[string]*tensor.Dense, error) {
	out := map[string]*tensor.Dense{}
	for v := range ctx.IterVariables() {
		if v.Scope() != context.RootScope || v.Shape().DType != dtypes.Float32 {
			continue // optimizer state and step counters
		}
		d, err := hostTensor(v)
		if err != nil {
			return nil, err
		}
		out[v.Name()] = d
	}
	return out, nil
}

func hostTensor(v *context.Variable) (*tensor.Dense, error) {
	val, err := v.Value()
	if err != nil {
		return nil, fmt.Errorf("train: variable %s: %w", v.ScopeAndName(), err)
	}
	if val.DType() != dtypes.Float32 {
		return nil, fmt.Errorf("train: variable %s is %s, not float32", v.ScopeAndName(), val.DType())
	}
	data, err := tensors.CopyFlatData[float32](val)
	if err != nil {
		return nil, fmt.Errorf("train: variable %s: %w", v.ScopeAndName(), err)
	}
	return &tensor.Dense{Shape: append([]int(nil), val.Shape().Dimensions...), Data: data}, nil
}

// saveContext writes every variable of ctx (weights, optimizer moments, step counters,
// learning rate) to path, float32 as F32 and int64 as I64, with meta as metadata.
func saveContext(path string, ctx *context.Context, meta map[string]string) error {
	var raws []safetensors.RawTensor
	for v := range ctx.IterVariables() {
		val, err := v.Value()
		if err != nil {
			return fmt.Errorf("train: save %s: %w", v.ScopeAndName(), err)
		}
		name := v.Scope() + keySep + v.Name()
		dims := append([]int(nil), val.Shape().Dimensions...)
		switch val.DType() {
		case dtypes.Float32:
			data, err := tensors.CopyFlatData[float32](val)
			if err != nil {
				return err
			}
			b := make([]byte, 4*len(data))
			for i, f := range data {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
			}
			raws = append(raws, safetensors.RawTensor{Name: name, DType: safetensors.F32, Shape: dims, Data: b})
		case dtypes.Int64:
			data, err := tensors.CopyFlatData[int64](val)
			if err != nil {
				return err
			}
			b := make([]byte, 8*len(data))
			for i, x := range data {
				binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
			}
			raws = append(raws, safetensors.RawTensor{Name: name, DType: safetensors.I64, Shape: dims, Data: b})
		default:
			return fmt.Errorf("train: save %s: dtype %s not supported", v.ScopeAndName(), val.DType())
		}
	}
	sort.Slice(raws, func(i, j int) bool { return raws[i].Name < raws[j].Name })
	if err := safetensors.WriteRawFile(path, raws, meta); err != nil {
		return fmt.Errorf("train: save %s: %w", path, err)
	}
	return nil
}

// loadContext restores a context written by saveContext: root-scope float32 variables are
// trainable, everything else (optimizer state, counters) is not. It returns the file's
// metadata.
func loadContext(path string) (*context.Context, map[string]string, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	defer f.Close()
	ctx := context.New().Checked(false)
	for _, key := range f.Names() {
		i := strings.LastIndex(key, keySep)
		if i < 0 {
			return nil, nil, fmt.Errorf("%w: %s: tensor %q has no scope", ErrCheckpoint, path, key)
		}
		scope, name := key[:i], key[i+len(keySep):]
		info, _ := f.Info(key)
		dims := make([]int, len(info.Shape))
		for j, d := range info.Shape {
			dims[j] = int(d)
		}
		raw, err := f.Bytes(key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
		}
		var t *tensors.Tensor
		switch info.DType {
		case safetensors.F32:
			data := make([]float32, len(raw)/4)
			for j := range data {
				data[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			}
			t = tensors.FromFlatDataAndDimensions(data, dims...)
		case safetensors.I64:
			data := make([]int64, len(raw)/8)
			for j := range data {
				data[j] = int64(binary.LittleEndian.Uint64(raw[8*j:]))
			}
			t = tensors.FromFlatDataAndDimensions(data, dims...)
		default:
			return nil, nil, fmt.Errorf("%w: %s: tensor %q has dtype %s", ErrCheckpoint, path, key, info.DType)
		}
		v := ctx.InAbsPath(scope).VariableWithValue(name, t)
		v.SetTrainable(scope == context.RootScope && info.DType == safetensors.F32)
	}
	return ctx, f.Metadata(), nil
}
