package nn

import (
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/vdpp/vdpp/model/nn/backendspec"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Holding is what a backend can hold weights in, the one fact NewWeightsHeld and the
// planners' HeldTypes read:
//
//   - with vdpp's fused CPU kernels (Kernels) every weight type is held compact, in the
//     layouts the kernels read;
//   - without them (XLA on a CPU or a GPU, `--backend go:kernels=off`), a weight asked in
//     bf16 or f16 is held as a GoMLX tensor of that dtype when the backend has it (BF16,
//     F16), and graphs convert it to float32 where they use it (ConvertDType, which XLA
//     may fuse into the product); every other type, the block types included, is held in
//     float32 (the stored values widened once at load).
type Holding struct {
	Kernels   bool // vdpp's fused CPU kernels read every type as held
	BF16, F16 bool // GoMLX dtypes the backend holds and converts to float32 in a graph
}

// xlaHolding is XLA's: both half dtypes (StableHLO's bf16 and f16, on every PJRT plugin).
var xlaHolding = Holding{BF16: true, F16: true}

// goHolding is simplego's without the fused kernels: the half dtypes its capabilities
// list (GoMLX v0.26: BFloat16, not Float16, which its ConvertDType lacks too).
func goHolding() Holding {
	return Holding{BF16: simplego.Capabilities.DTypes[dtypes.BFloat16], F16: simplego.Capabilities.DTypes[dtypes.Float16]}
}

// HoldingOf returns what backend b holds weights in.
func HoldingOf(b backends.Backend) Holding {
	if !IsSimpleGo(b) {
		return xlaHolding
	}
	if UsesKernels(b) {
		return Holding{Kernels: true}
	}
	return goHolding()
}

// HoldingFor returns what the backend r resolves to holds weights in, without creating it
// (a planner's view).
func HoldingFor(r backendspec.Resolution) Holding {
	switch {
	case r.Kind == backendspec.KindXLA:
		return xlaHolding
	case r.Kernels.Fused:
		return Holding{Kernels: true}
	}
	return goHolding()
}

// HoldingForSpec returns what the backend of a --backend value holds weights in, resolved
// on this host (backendspec.Resolve; "" is the automatic choice). A spec naming XLA that
// does not resolve here (a plan made for a GPU host elsewhere) is XLA's holding; any other
// error is returned.
func HoldingForSpec(spec string) (Holding, error) {
	r, err := backendspec.Resolve(spec, backendspec.OSProbe())
	if err != nil {
		if s := strings.TrimSpace(spec); strings.HasPrefix(s, "xla") || strings.HasPrefix(s, "cuda") {
			return xlaHolding, nil
		}
		return Holding{}, err
	}
	return HoldingFor(r), nil
}

// Type returns the type a tensor asked to be held in t is held in.
func (h Holding) Type(t quant.Type) quant.Type {
	switch {
	case h.Kernels:
		return t
	case t == quant.BF16 && h.BF16, t == quant.F16 && h.F16:
		return t
	}
	return quant.F32
}

// String says in a few words what h holds, for doctor and logs.
func (h Holding) String() string {
	switch {
	case h.Kernels:
		return "every weight type, as vdpp's CPU kernels read it"
	case h.BF16 && h.F16:
		return "bf16 and f16 as GoMLX dtypes, every other type in f32"
	case h.BF16:
		return "bf16 as a GoMLX dtype, every other type in f32"
	}
	return "f32"
}

// halfDType is the GoMLX dtype of a half weight type.
func halfDType(t quant.Type) dtypes.DType {
	if t == quant.BF16 {
		return dtypes.BFloat16
	}
	return dtypes.Float16
}
