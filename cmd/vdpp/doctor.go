package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/nn/backendspec"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// doctorReport is what `vdpp doctor` found; --json writes it as is.
type doctorReport struct {
	GPU              backendspec.GPU         `json:"gpu"`
	CUDAPlugin       string                  `json:"cuda_plugin"`
	PluginSearched   []string                `json:"plugin_searched"`
	CUDADataDir      string                  `json:"cuda_data_dir"`
	CUDADataDirTried []string                `json:"cuda_data_dir_tried"`
	MissingCUDALibs  []string                `json:"missing_cuda_libs"`
	Spec             string                  `json:"spec"`
	Resolution       *backendspec.Resolution `json:"resolution,omitempty"`
	ResolveError     string                  `json:"resolve_error,omitempty"`
	Tried            bool                    `json:"tried"`
	Backend          string                  `json:"backend,omitempty"`
	TryError         string                  `json:"try_error,omitempty"`
	// CPUKernels names the CPU kernels a pure-Go backend of the resolved spec runs (the
	// spec's kernels= option, else $VDPP_KERNELS, else all; nn.DescribeKernels);
	// KernelsRan counts the fused ops --try ran on it, by name.
	CPUKernels string           `json:"cpu_kernels"`
	KernelsRan map[string]int64 `json:"kernels_ran,omitempty"`
	// Backends are the GoMLX backends built into this binary ("go", "xla"); Static says
	// whether it was built without cgo (CGO_ENABLED=0).
	Backends []string `json:"backends"`
	Static   bool     `json:"static"`
	// Weights, with --model, are the model's weight bytes by role and by the type they are
	// held in (the family's sizes for --weights-dtype and the files, as vdpp plan counts).
	Weights *doctorWeights `json:"weights,omitempty"`
}

// doctorWeights are a model's weights as the family sizes them.
type doctorWeights struct {
	Model     string           `json:"model"`
	DType     string           `json:"weights_dtype"`
	Condition int64            `json:"condition"`
	Denoisers []int64          `json:"denoisers"`
	Decode    int64            `json:"decode"`
	Types     map[string]int64 `json:"types"`
	// Holds says what the --backend holds weights in (nn.Holding); Widened, on a backend
	// without vdpp's CPU kernels, the block types the files or --weights-dtype ask for that
	// it holds in f32 instead.
	Holds   string   `json:"holds"`
	Widened []string `json:"widened,omitempty"`
}

// modelWeights sizes a model's weights for the load options w on the backend of spec.
func modelWeights(modelArg, spec string, w family.WeightOptions) (*doctorWeights, error) {
	m, err := family.Resolve(modelArg)
	if err != nil {
		return nil, err
	}
	wg, ok := m.Family.(family.Weigher)
	if !ok {
		return nil, fmt.Errorf("--model %s: a %s model has no weights to size", modelArg, m.Family.Name())
	}
	fw, err := wg.Weights(m.Dir, family.Options{Backend: spec, Weights: w})
	if err != nil {
		return nil, err
	}
	holding, err := nn.HoldingForSpec(spec)
	if err != nil {
		return nil, err
	}
	dt := w.DType
	if dt == "" {
		dt = "auto"
	}
	dw := &doctorWeights{Model: modelArg, DType: dt, Condition: fw.Condition, Denoisers: fw.Denoisers, Decode: fw.Decode, Types: fw.Types, Holds: holding.String()}
	if !holding.Kernels {
		// What the CPU kernels would hold: a block type among them is held in f32 here.
		asked, err := wg.Weights(m.Dir, family.Options{Backend: "go:kernels=on", Weights: w})
		if err != nil {
			return nil, err
		}
		for name, n := range asked.Types {
			if t, err := quant.Parse(name); err == nil && n > 0 && holding.Type(t) != t {
				dw.Widened = append(dw.Widened, name)
			}
		}
		slices.Sort(dw.Widened)
	}
	return dw, nil
}

// buildStatic reports whether this binary was built with CGO_ENABLED=0.
func buildStatic() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			return s.Value == "0"
		}
	}
	return false
}

// runDoctor prints what vdpp detects about GPUs and PJRT plugins and which backend a
// --backend value resolves to; with --try it also creates the backend and runs a small
// matrix product on it, checked against Go.
func runDoctor(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("doctor", stdout, stderr)
	spec := fs.String("backend", "", "backend to resolve: go, xla:cuda, xla:/path/plugin.so (default: automatic)")
	try := fs.Bool("try", false, "create the backend and run a small computation on it")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	modelArg := fs.String("model", "", "a model `NAME|DIR` whose weight bytes to size, by role and by held type (with --weights-dtype and the weights files as the commands take them)")
	var wo family.WeightOptions
	wo.RegisterFlags(fs.FlagSet)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	p := backendspec.OSProbe()
	rep := doctorReport{GPU: backendspec.DetectGPU(p), Spec: *spec, Backends: nn.CompiledBackends(), Static: buildStatic()}
	rep.CUDAPlugin, rep.PluginSearched = backendspec.FindCUDAPlugin(p)
	rep.CUDADataDir, rep.CUDADataDirTried = backendspec.FindCUDADataDir(p, rep.CUDAPlugin)
	rep.MissingCUDALibs, _ = backendspec.MissingCUDALibs(p, rep.CUDAPlugin)
	if *modelArg != "" {
		w, err := modelWeights(*modelArg, *spec, wo)
		if err != nil {
			return err
		}
		rep.Weights = w
	}
	r, rerr := backendspec.Resolve(*spec, p)
	rep.CPUKernels = cpuKernels(r, rerr, p)
	if rerr != nil {
		rep.ResolveError = rerr.Error()
	} else {
		rep.Resolution = &r
		if *try {
			rep.Tried = true
			name, ran, err := tryBackend(r)
			rep.Backend, rep.KernelsRan = name, ran
			if err != nil {
				rep.TryError = err.Error()
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := writeDoctor(stdout, rep); err != nil {
		return err
	}
	switch {
	case rerr != nil:
		return rerr
	case rep.TryError != "":
		return fmt.Errorf("backend %s failed: %s", r.Config, rep.TryError)
	}
	return nil
}

// writeDoctor prints the report for people.
func writeDoctor(w io.Writer, rep doctorReport) error {
	var b strings.Builder
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	build := "dynamic (cgo)"
	if rep.Static {
		build = "static (CGO_ENABLED=0)"
	}
	fmt.Fprintf(&b, "backends built in: %s; %s binary\n", strings.Join(rep.Backends, ", "), build)
	if !slices.Contains(rep.Backends, "xla") {
		fmt.Fprintf(&b, "                   (no XLA: --backend xla:* needs the default build; see docs/deploy.md)\n")
	}
	fmt.Fprintf(&b, "NVIDIA GPU:        %s (%s)\n", yes(rep.GPU.Found), rep.GPU.Evidence)
	if rep.CUDAPlugin != "" {
		fmt.Fprintf(&b, "CUDA PJRT plugin:  %s\n", rep.CUDAPlugin)
	} else {
		fmt.Fprintf(&b, "CUDA PJRT plugin:  none; looked in:\n")
		for _, s := range rep.PluginSearched {
			fmt.Fprintf(&b, "                     %s\n", s)
		}
	}
	if rep.CUDADataDir != "" {
		fmt.Fprintf(&b, "CUDA data folder:  %s\n", rep.CUDADataDir)
	} else {
		fmt.Fprintf(&b, "CUDA data folder:  none with nvvm/libdevice (tried %s)\n", strings.Join(rep.CUDADataDirTried, ", "))
	}
	if len(rep.MissingCUDALibs) > 0 {
		fmt.Fprintf(&b, "CUDA libraries:    not found: %s\n", strings.Join(rep.MissingCUDALibs, ", "))
	} else {
		fmt.Fprintf(&b, "CUDA libraries:    driver, cuBLAS and cuDNN found\n")
	}
	fmt.Fprintf(&b, "CPU kernels: %s\n", rep.CPUKernels)
	if w := rep.Weights; w != nil {
		den := make([]string, len(w.Denoisers))
		for i, d := range w.Denoisers {
			den[i] = plan.Bytes(d)
		}
		fmt.Fprintf(&b, "weights of %s (--weights-dtype %s): condition %s, denoiser %s, decode %s\n", w.Model, w.DType,
			plan.Bytes(w.Condition), strings.Join(den, " + "), plan.Bytes(w.Decode))
		fmt.Fprintf(&b, "  held by type:    %s\n", plan.TypeBytes(w.Types))
		fmt.Fprintf(&b, "  backend holds:   %s\n", w.Holds)
		if len(w.Widened) > 0 {
			fmt.Fprintf(&b, "  note:            %s held in f32 on this backend; --weights-dtype bf16 holds the weights in half of that\n", strings.Join(w.Widened, ", "))
		}
	}
	spec := rep.Spec
	if spec == "" {
		spec = "(automatic)"
	}
	fmt.Fprintf(&b, "--backend %s\n", spec)
	if rep.ResolveError != "" {
		fmt.Fprintf(&b, "  error: %s\n", rep.ResolveError)
	}
	if r := rep.Resolution; r != nil {
		fmt.Fprintf(&b, "  would use:       %s (%s, from %s)\n", r.Config, r.Kind, r.Source)
		if r.Reason != "" {
			fmt.Fprintf(&b, "  because:         %s\n", r.Reason)
		}
		for _, e := range r.Env {
			fmt.Fprintf(&b, "  sets:            %s=%s\n", e.Name, e.Value)
		}
		if len(r.Options) > 0 {
			fmt.Fprintf(&b, "  PJRT options:    %v\n", r.Options)
		}
		for _, wn := range r.Warnings {
			fmt.Fprintf(&b, "  warning:         %s\n", wn)
		}
	}
	if rep.Tried {
		if rep.TryError == "" {
			fmt.Fprintf(&b, "  try:             ok on %s\n", rep.Backend)
			if len(rep.KernelsRan) > 0 {
				names := slices.Sorted(maps.Keys(rep.KernelsRan))
				fmt.Fprintf(&b, "  fused ops ran:   %s\n", strings.Join(names, ", "))
			}
		} else {
			fmt.Fprintf(&b, "  try:             FAILED: %s\n", rep.TryError)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tryBackend creates r's backend and checks a 64x64 matrix product against Go (relative
// L2 <= 1e-3, which TF32 matrix units meet), then runs a layer norm, which is a fused op on
// a pure-Go backend that runs them. It returns the backend's description and the fused
// ops that ran (nn.KernelsRan).
func tryBackend(r backendspec.Resolution) (string, map[string]int64, error) {
	b, err := nn.NewResolvedBackend(r)
	if err != nil {
		return "", nil, err
	}
	defer b.Finalize()
	name := b.Name() + ": " + b.Description()
	prog, err := nn.NewProgram(b, nil, "doctor", func(_ nn.Scope, in []*Node) []*Node {
		return []*Node{DotGeneral(in[0], []int{1}, nil, in[1], []int{0}, nil), nn.LayerNorm(in[0], nil, nil, 1e-5)}
	})
	if err != nil {
		return name, nil, err
	}
	defer prog.Close()
	const n = 64
	x := &tensor.Dense{Shape: []int{n, n}, Data: make([]float32, n*n)}
	y := &tensor.Dense{Shape: []int{n, n}, Data: make([]float32, n*n)}
	for i := range x.Data {
		x.Data[i] = float32((i*7919)%101)/50 - 1
		y.Data[i] = float32((i*104729)%103)/51 - 1
	}
	out, err := prog.Run(x, y)
	if err != nil {
		return name, nil, err
	}
	var num, den float64
	for i := range n {
		for j := range n {
			var want float64
			for k := range n {
				want += float64(x.Data[i*n+k]) * float64(y.Data[k*n+j])
			}
			d := float64(out[0].Data[i*n+j]) - want
			num += d * d
			den += want * want
		}
	}
	if rel := math.Sqrt(num / den); !(rel <= 1e-3) {
		return name, nil, fmt.Errorf("64x64 matrix product: relative L2 error %.3g > 1e-3", rel)
	}
	return name, nn.KernelsRan(b), nil
}

// cpuKernels describes the CPU kernels a pure-Go backend of the resolution r runs: r's
// own for a go backend, else those of `--backend go` (its $VDPP_KERNELS default).
func cpuKernels(r backendspec.Resolution, rerr error, p backendspec.Probe) string {
	if rerr != nil || r.Kind != backendspec.KindGo {
		var err error
		if r, err = backendspec.Resolve("go", p); err != nil {
			return err.Error()
		}
	}
	b, err := nn.NewGoBackend(r.Kernels)
	if err != nil {
		return err.Error()
	}
	defer b.Finalize()
	return nn.DescribeKernels(b) + " (kernels=" + r.Kernels.String() + ")"
}
