// Package unetbench times one SVD UNet call (the denoiser call of one sampling step) on a
// backend, with random weights of a given config, and reports the time per call, the
// FLOPs of the call (unetcost) and the achieved TFLOP/s.
//
// # Contract
//
// Run builds deterministic random weights for the config's state dict (RandomWeights), the
// model through the injected Factory (so this package does not depend on the UNet's
// package), deterministic random inputs of the requested shape, runs Warmup calls (the
// first compiles the graph) and then Iters timed calls, each timed on the host clock
// around a Forward that returns the output on the host (so device work is finished and
// the input upload and output download are included; at SVD sizes they are under 20 MB).
// It never invents numbers: a failing call fails the run. GPU memory is not visible from
// here; the GPU check script samples it with nvidia-smi.
package unetbench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/unetcost"
	"github.com/vdpp/vdpp/tensor"
)

// ErrNoModel is returned by Run without a Factory.
var ErrNoModel = errors.New("unetbench: no UNet factory")

// Forwarder is one UNet: sample [B, T, in, h, w], timestep [1], ehs [B, 1, D],
// addedTimeIDs [B, 3] -> [B, T, out, h, w].
type Forwarder interface {
	Forward(sample, timestep, ehs, addedTimeIDs *tensor.Dense) (*tensor.Dense, error)
}

// Factory builds a Forwarder from a config and its weights on a backend spec, computing in
// dtype ("f32", "bf16" or "f16"); it returns an error for a dtype it does not support.
type Factory func(cfg unet.Config, weights map[string]*tensor.Dense, backend, dtype string) (Forwarder, error)

// ExpectedFunc lists a config's tensors and shapes (unet.ExpectedTensors).
type ExpectedFunc func(cfg unet.Config) (map[string][]int, error)

// Options are the flags of `vdpp unetbench`.
type Options struct {
	Config  string // "xt" (SVD-XT, unetcost.XTConfigJSON) or a unet/config.json path
	Frames  int
	Height  int // pixels; the latent is Height/8
	Width   int
	Batch   int // 2 = one guided call
	DType   string
	Backend string
	Warmup  int
	Iters   int
	Seed    uint64
}

// DefaultOptions is SVD-XT at 576x1024, 14 frames, batch 2, float32 (the dtype model/svd/unet computes in).
func DefaultOptions() Options {
	return Options{Config: "xt", Frames: 14, Height: 576, Width: 1024, Batch: 2, DType: "f32", Warmup: 2, Iters: 10, Seed: 1}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Frames < 1 || o.Batch < 1:
		return fmt.Errorf("unetbench: frames %d and batch %d must be positive", o.Frames, o.Batch)
	case o.Height < 8 || o.Width < 8 || o.Height%8 != 0 || o.Width%8 != 0:
		return fmt.Errorf("unetbench: %dx%d pixels: height and width must be positive multiples of 8", o.Height, o.Width)
	case o.Iters < 1 || o.Warmup < 0:
		return fmt.Errorf("unetbench: iters %d must be positive and warmup %d not negative", o.Iters, o.Warmup)
	}
	switch o.DType {
	case "f32", "bf16", "f16":
	default:
		return fmt.Errorf("unetbench: dtype %q: want f32, bf16 or f16", o.DType)
	}
	return nil
}

// Result is one benchmark run; JSON field names are what scripts/gpu reads.
type Result struct {
	Config      string    `json:"config"`
	Backend     string    `json:"backend"`
	DType       string    `json:"dtype"`
	Batch       int       `json:"batch"`
	Frames      int       `json:"frames"`
	Height      int       `json:"height"`
	Width       int       `json:"width"`
	Params      int64     `json:"params"`
	FLOPs       float64   `json:"flops"`
	BuildS      float64   `json:"build_s"`      // weights upload and model construction
	FirstCallS  float64   `json:"first_call_s"` // includes compilation
	TimesMS     []float64 `json:"times_ms"`
	MedianMS    float64   `json:"median_ms"`
	MinMS       float64   `json:"min_ms"`
	MeanMS      float64   `json:"mean_ms"`
	TFLOPS      float64   `json:"tflops"` // FLOPs / median time
	HostPeakRSS int64     `json:"host_peak_rss_bytes"`
	OutputRMS   float64   `json:"output_rms"` // sanity: finite, non-zero
}

// LoadConfig returns the UNet config named by o.Config.
func LoadConfig(name string, readFile func(string) ([]byte, error)) (unet.Config, error) {
	if name == "xt" {
		return unetcost.XTConfig(), nil
	}
	raw, err := readFile(name)
	if err != nil {
		return unet.Config{}, fmt.Errorf("unetbench: config: %w", err)
	}
	return unet.ParseConfig(name, raw)
}

// Runner runs benchmarks; its fields are the dependencies tests replace.
type Runner struct {
	Expected ExpectedFunc
	New      Factory
	ReadFile func(string) ([]byte, error) // os.ReadFile when nil
	Now      func() time.Time             // time.Now when nil
	PeakRSS  func() int64                 // VmHWM of /proc/self/status when nil
	// CheckDType, when set, refuses a dtype before any weights are drawn.
	CheckDType func(dtype string) error
}

// Run benchmarks o.
func (r Runner) Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if r.New == nil || r.Expected == nil {
		return Result{}, ErrNoModel
	}
	if r.CheckDType != nil {
		if err := r.CheckDType(o.DType); err != nil {
			return Result{}, fmt.Errorf("unetbench: %w", err)
		}
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	read := r.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	cfg, err := LoadConfig(o.Config, read)
	if err != nil {
		return Result{}, err
	}
	h, w := o.Height/8, o.Width/8
	cost, err := unetcost.Count(cfg, unetcost.Shape{Batch: o.Batch, Frames: o.Frames, Height: h, Width: w})
	if err != nil {
		return Result{}, err
	}
	res := Result{Config: o.Config, Backend: o.Backend, DType: o.DType, Batch: o.Batch, Frames: o.Frames,
		Height: o.Height, Width: o.Width, Params: cost.Params, FLOPs: cost.Total}

	shapes, err := r.Expected(cfg)
	if err != nil {
		return res, fmt.Errorf("unetbench: expected tensors: %w", err)
	}
	t0 := now()
	model, err := r.New(cfg, RandomWeights(shapes, o.Seed), o.Backend, o.DType)
	if err != nil {
		return res, fmt.Errorf("unetbench: build: %w", err)
	}
	if c, ok := model.(interface{ Close() error }); ok {
		defer c.Close()
	}
	res.BuildS = now().Sub(t0).Seconds()

	in := Inputs(cfg, o.Batch, o.Frames, h, w, o.Seed)
	var out *tensor.Dense
	call := func() (time.Duration, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s := now()
		out, err = model.Forward(in.Sample, in.Timestep, in.EHS, in.AddedTimeIDs)
		return now().Sub(s), err
	}
	for i := range max(o.Warmup, 1) {
		d, err := call()
		if err != nil {
			return res, fmt.Errorf("unetbench: warm-up call %d: %w", i, err)
		}
		if i == 0 {
			res.FirstCallS = d.Seconds()
		}
	}
	for i := range o.Iters {
		d, err := call()
		if err != nil {
			return res, fmt.Errorf("unetbench: call %d: %w", i, err)
		}
		res.TimesMS = append(res.TimesMS, float64(d.Microseconds())/1000)
	}
	want := []int{o.Batch, o.Frames, cfg.OutChannels, h, w}
	if out == nil || !slices.Equal(out.Shape, want) {
		return res, fmt.Errorf("unetbench: output shape %v, want %v", shapeOf(out), want)
	}
	res.OutputRMS = rms(out.Data)
	if math.IsNaN(res.OutputRMS) || math.IsInf(res.OutputRMS, 0) || res.OutputRMS == 0 {
		return res, fmt.Errorf("unetbench: output RMS %v: not a usable result", res.OutputRMS)
	}
	res.MedianMS, res.MinMS, res.MeanMS = summarize(res.TimesMS)
	res.TFLOPS = res.FLOPs / (res.MedianMS / 1000) / 1e12
	peak := r.PeakRSS
	if peak == nil {
		peak = procPeakRSS
	}
	res.HostPeakRSS = peak()
	return res, nil
}

func shapeOf(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}

// summarize returns the median, minimum and mean of xs (not empty).
func summarize(xs []float64) (median, minimum, mean float64) {
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	for _, x := range s {
		mean += x
	}
	return median, s[0], mean / float64(n)
}

func rms(xs []float32) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s / float64(max(len(xs), 1)))
}

// InputSet is one UNet call's inputs.
type InputSet struct{ Sample, Timestep, EHS, AddedTimeIDs *tensor.Dense }

// Inputs draws deterministic inputs like a sampling step's: a unit-normal sample, the
// timestep 0.25·ln(700) (the first step's sigma), a unit-normal image embedding and SVD's
// default added time ids (fps-1 = 6, motion bucket 127, noise augmentation 0.02).
func Inputs(cfg unet.Config, batch, frames, h, w int, seed uint64) InputSet {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	normal := func(shape ...int) *tensor.Dense {
		t := &tensor.Dense{Shape: shape, Data: make([]float32, tensor.NumElements(shape))}
		for i := range t.Data {
			t.Data[i] = float32(rng.NormFloat64())
		}
		return t
	}
	ids := &tensor.Dense{Shape: []int{batch, cfg.NumAddedTimeIDs()}, Data: make([]float32, batch*cfg.NumAddedTimeIDs())}
	defaults := []float32{6, 127, 0.02}
	for i := range ids.Data {
		ids.Data[i] = defaults[i%cfg.NumAddedTimeIDs()%len(defaults)]
	}
	return InputSet{
		Sample:       normal(batch, frames, cfg.InChannels, h, w),
		Timestep:     &tensor.Dense{Shape: []int{1}, Data: []float32{float32(0.25 * math.Log(700))}},
		EHS:          normal(batch, 1, cfg.CrossAttentionDim[0]),
		AddedTimeIDs: ids,
	}
}

// RandomWeights draws a deterministic value for every tensor of shapes: matrices and
// kernels N(0, 1/fan_in) (fan_in = the product of all but the first dimension), so
// activations keep their scale through the network; 1-D ".weight" tensors (norm scales)
// 1; every other 1-D tensor (biases, mix factors) 0.02·N(0, 1). Each tensor's stream is
// seeded by seed and its name, so the result does not depend on map order, and tensors
// are drawn in parallel.
func RandomWeights(shapes map[string][]int, seed uint64) map[string]*tensor.Dense {
	out := make(map[string]*tensor.Dense, len(shapes))
	names := make([]string, 0, len(shapes))
	for n, s := range shapes {
		names = append(names, n)
		out[n] = &tensor.Dense{Shape: slices.Clone(s), Data: make([]float32, tensor.NumElements(s))}
	}
	var wg sync.WaitGroup
	next := make(chan string)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				fill(out[n], n, seed)
			}
		}()
	}
	for _, n := range names {
		next <- n
	}
	close(next)
	wg.Wait()
	return out
}

// fill draws t's values (see RandomWeights).
func fill(t *tensor.Dense, name string, seed uint64) {
	hsh := fnv.New64a()
	hsh.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, hsh.Sum64()))
	if len(t.Shape) == 1 && strings.HasSuffix(name, ".weight") {
		for i := range t.Data {
			t.Data[i] = 1
		}
		return
	}
	scale := 0.02
	if len(t.Shape) >= 2 {
		fan := 1
		for _, d := range t.Shape[1:] {
			fan *= d
		}
		scale = 1 / math.Sqrt(float64(fan))
	}
	for i := range t.Data {
		t.Data[i] = float32(scale * rng.NormFloat64())
	}
}

// procPeakRSS reads the process's peak resident memory (VmHWM) from /proc/self/status;
// 0 where that file does not exist.
func procPeakRSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
