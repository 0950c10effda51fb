package backendspec

import (
	"fmt"
	"strings"
)

// KernelsEnv is the environment variable that gives the kernels= option of a go backend
// its default when the spec does not set it ("on", "gemm" or "off"), as GOMLX_BACKEND gives
// the spec its default.
const KernelsEnv = "VDPP_KERNELS"

// Kernels selects vdpp's CPU kernels on the pure-Go backend, each field one part. The
// zero value is GoMLX's own simplego.
type Kernels struct {
	// GEMM runs float32 matrix products on vdpp's matrix kernel (internal/gemm).
	GEMM bool `json:"gemm"`
	// Ops runs float32 elementwise ops and transposes on vdpp's executors.
	Ops bool `json:"ops"`
	// Fused runs vdpp's fused ops (attention, norms, convolutions, linear layers) in the
	// graphs of inference programs; they have no gradient, and a training graph never
	// gets them.
	Fused bool `json:"fused"`
}

// The selections the kernels= option names.
var (
	KernelsOn   = Kernels{GEMM: true, Ops: true, Fused: true} // "on": every kernel (the default)
	KernelsGEMM = Kernels{GEMM: true}                         // "gemm": the matrix kernel only
	KernelsOff  = Kernels{}                                   // "off": GoMLX's own simplego
)

// ParseKernels reads a kernels= value: "on" (or ""), "gemm", "off", or parts joined by
// "+" ("gemm+ops").
func ParseKernels(s string) (Kernels, error) {
	switch s = strings.TrimSpace(s); s {
	case "", "on":
		return KernelsOn, nil
	case "off":
		return KernelsOff, nil
	}
	var k Kernels
	for p := range strings.SplitSeq(s, "+") {
		switch p {
		case "gemm":
			k.GEMM = true
		case "ops":
			k.Ops = true
		case "fused":
			k.Fused = true
		default:
			return k, fmt.Errorf("%w: kernels %q: want on, off, or gemm, ops and fused joined by +", ErrBadSetting, s)
		}
	}
	return k, nil
}

// String is the kernels= value that selects k.
func (k Kernels) String() string {
	switch k {
	case KernelsOn:
		return "on"
	case KernelsOff:
		return "off"
	}
	var p []string
	if k.GEMM {
		p = append(p, "gemm")
	}
	if k.Ops {
		p = append(p, "ops")
	}
	if k.Fused {
		p = append(p, "fused")
	}
	return strings.Join(p, "+")
}
