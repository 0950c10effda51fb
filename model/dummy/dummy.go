// Package dummy is the seed's DummyUNet stand-in: a small real GoMLX network with the
// denoiser's interface, so the engine can be run end to end on real compute without a
// checkpoint. It is registered as model "dummy".
//
// Network (latents [N, T, C, H, W], permuted to [N, C, T, H, W] for the 3-D convolutions):
//
//	h   = Conv3d(C -> Hd, kernel 3, padding 1)(x)                    "conv_in"
//	h   = LayerNorm over the Hd channels at every (t, y, x), eps 1e-5 "norm"
//	h  += time_proj(Timesteps(t, 16, flip_sin_to_cos)) + cond_proj(vec)  (per row, per channel)
//	out = Conv3d(Hd -> C, kernel 3, padding 1)(h)                     "conv_out"
//
// vec is the row's conditioning Cond["vec"] (one value per latent channel, as the synthetic
// model; a row without it uses ones) and is replaced by zeros for Uncond rows, so the
// conditioning contribution of an unconditional row is exactly zero and guided outputs
// differ from unguided ones. cond_proj has no bias.
//
// Weights are drawn deterministically from Config.Seed (see InitWeights): a PCG generator
// from math/rand/v2 seeded with (uint64(Seed), 0x9e3779b97f4a7c15) draws, in the order
// conv_in.weight, conv_in.bias, time_proj.weight, time_proj.bias, cond_proj.weight,
// conv_out.weight, conv_out.bias, each element as NormFloat64()/sqrt(fan_in) rounded to
// float32 (fan_in = C·27, 16, C and Hd·27); norm.weight is 1 and norm.bias 0.
//
// Determinism: the same instance or two instances with the same Config give bit-identical
// outputs for the same Input, across runs and processes. A row's output is also
// bit-identical whether it is computed alone or in a batch: Predict evaluates the network
// one row at a time (see Denoiser.Predict), because the backend's matmul may choose a
// different blocking, and hence summation order, for a different batch size.
package dummy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// CondKey is the conditioning entry the dummy model reads (the synthetic model's key).
const CondKey = "vec"

// TimeDim is the size of the sinusoidal timestep embedding.
const TimeDim = 16

// Default sizes used when Config leaves them zero.
const (
	DefaultHiddenChannels = 32
	DefaultLatentChannels = 4
)

// Config is the dummy model's configuration.
type Config struct {
	HiddenChannels, LatentChannels int
	Seed                           int64
	Backend                        string
}

// FromModelConfig picks the dummy's fields from a model.Config, filling the defaults.
func FromModelConfig(c model.Config) Config {
	cfg := Config{HiddenChannels: c.HiddenChannels, LatentChannels: c.LatentChannels, Seed: c.Seed, Backend: c.Backend}
	if cfg.HiddenChannels == 0 {
		cfg.HiddenChannels = DefaultHiddenChannels
	}
	if cfg.LatentChannels == 0 {
		cfg.LatentChannels = DefaultLatentChannels
	}
	return cfg
}

func (c Config) validate() error {
	if c.HiddenChannels <= 0 || c.LatentChannels <= 0 {
		return fmt.Errorf("dummy: channels must be positive (hidden %d, latent %d)", c.HiddenChannels, c.LatentChannels)
	}
	return nil
}

// tensorSpec is one weight: its name, shape and fan-in (0: not drawn).
type tensorSpec struct {
	name  string
	shape []int
	fanIn int
	fill  float32 // value of the undrawn tensors
}

// specs lists the weights in draw order.
func (c Config) specs() []tensorSpec {
	C, Hd := c.LatentChannels, c.HiddenChannels
	return []tensorSpec{
		{"conv_in.weight", []int{Hd, C, 3, 3, 3}, C * 27, 0},
		{"conv_in.bias", []int{Hd}, C * 27, 0},
		{"time_proj.weight", []int{Hd, TimeDim}, TimeDim, 0},
		{"time_proj.bias", []int{Hd}, TimeDim, 0},
		{"cond_proj.weight", []int{Hd, C}, C, 0},
		{"conv_out.weight", []int{C, Hd, 3, 3, 3}, Hd * 27, 0},
		{"conv_out.bias", []int{C}, Hd * 27, 0},
		{"norm.weight", []int{Hd}, 0, 1},
		{"norm.bias", []int{Hd}, 0, 0},
	}
}

// ExpectedTensors returns the name -> shape of every weight of the network.
func ExpectedTensors(c Config) map[string][]int {
	out := map[string][]int{}
	for _, s := range c.specs() {
		out[s.name] = s.shape
	}
	return out
}

// InitWeights draws the weights of c deterministically from c.Seed (see the package doc).
func InitWeights(c Config) map[string]*tensor.Dense {
	r := rand.New(rand.NewPCG(uint64(c.Seed), 0x9e3779b97f4a7c15))
	out := map[string]*tensor.Dense{}
	for _, s := range c.specs() {
		d := tensor.New(s.shape...)
		if s.fanIn > 0 {
			scale := 1 / math.Sqrt(float64(s.fanIn))
			for i := range d.Data {
				d.Data[i] = float32(r.NormFloat64() * scale)
			}
		} else {
			for i := range d.Data {
				d.Data[i] = s.fill
			}
		}
		out[s.name] = d
	}
	return out
}

// Build is the network's graph: x [N, T, C, H, W], t a scalar timestep, vec [N, C] (zero
// rows for unconditional rows); it returns [N, T, C, H, W].
func Build(s nn.Scope, c Config, x, t, vec *Node) *Node {
	g := x.Graph()
	C, Hd := c.LatentChannels, c.HiddenChannels
	h := TransposeAllAxes(x, 0, 2, 1, 3, 4) // [N, C, T, H, W]
	h = nn.Conv3D(h, s.Param(g, "conv_in.weight", Hd, C, 3, 3, 3), s.Param(g, "conv_in.bias", Hd), nn.ConvOpts{Padding: 1})
	h = TransposeAllAxes(h, 0, 2, 3, 4, 1) // channels last [N, T, H, W, Hd]
	h = nn.LayerNorm(h, s.Param(g, "norm.weight", Hd), s.Param(g, "norm.bias", Hd), 1e-5)
	temb := nn.Linear(nn.Timesteps(t, TimeDim, true, 0), s.Param(g, "time_proj.weight", Hd, TimeDim), s.Param(g, "time_proj.bias", Hd)) // [1, Hd]
	cemb := nn.Linear(vec, s.Param(g, "cond_proj.weight", Hd, C), nil)                                                                  // [N, Hd]
	emb := Add(cemb, temb)
	n := x.Shape().Dim(0)
	h = Add(h, Reshape(emb, n, 1, 1, 1, Hd))
	h = TransposeAllAxes(h, 0, 4, 1, 2, 3) // [N, Hd, T, H, W]
	h = nn.Conv3D(h, s.Param(g, "conv_out.weight", C, Hd, 3, 3, 3), s.Param(g, "conv_out.bias", C), nn.ConvOpts{Padding: 1})
	return TransposeAllAxes(h, 0, 2, 1, 3, 4) // [N, T, C, H, W]
}

// Denoiser is the dummy model bound to a backend.
type Denoiser struct {
	cfg     Config
	weights *nn.Weights
	prog    *nn.Program
}

// New draws the weights of cfg, uploads them to cfg.Backend and prepares the program
// (compiled lazily per input shape).
func New(cfg Config) (*Denoiser, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b, err := nn.NewBackend(cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("dummy: %w", err)
	}
	w, err := nn.NewWeights(b, InitWeights(cfg))
	if err != nil {
		return nil, fmt.Errorf("dummy: %w", err)
	}
	p, err := nn.NewProgram(b, w, "dummy", func(s nn.Scope, in []*Node) []*Node {
		return []*Node{Build(s, cfg, in[0], in[1], in[2])}
	})
	if err != nil {
		return nil, fmt.Errorf("dummy: %w", err)
	}
	return &Denoiser{cfg: cfg, weights: w, prog: p}, nil
}

// Config returns the configuration the denoiser was built with (defaults filled).
func (d *Denoiser) Config() Config { return d.cfg }

// WeightBytes implements model.Denoiser.
func (d *Denoiser) WeightBytes() int64 { return d.weights.Bytes() }

// Close releases the compiled graphs.
func (d *Denoiser) Close() error { return d.prog.Close() }

// Predict implements model.Denoiser. It evaluates the rows one at a time (a [1, T, C, H, W]
// graph), so a row's output never depends on the rest of its batch; ctx is checked
// between rows.
func (d *Denoiser) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("dummy: %w", err)
	}
	sh := in.Latents.Shape
	if sh[2] != d.cfg.LatentChannels {
		return nil, fmt.Errorf("dummy: latents have %d channels, model has %d", sh[2], d.cfg.LatentChannels)
	}
	n, per := sh[0], tensor.NumElements(sh[1:])
	out := tensor.New(sh...)
	t := &tensor.Dense{Data: []float32{in.Timestep}}
	for r := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vec, err := condVector(in.Cond[r], in.Uncond[r], d.cfg.LatentChannels)
		if err != nil {
			return nil, fmt.Errorf("dummy: row %d: %w", r, err)
		}
		x := in.Latents.Rows(r, r+1)
		res, err := d.prog.Run(x, t, vec)
		if err != nil {
			return nil, fmt.Errorf("dummy: row %d: %w", r, err)
		}
		copy(out.Data[r*per:(r+1)*per], res[0].Data)
	}
	return out, nil
}

// condVector returns the row's conditioning as [1, C]: zeros when uncond, ones when the
// row has no CondKey entry.
func condVector(c model.Conditioning, uncond bool, channels int) (*tensor.Dense, error) {
	v := tensor.New(1, channels)
	if uncond {
		return v, nil
	}
	cv, ok := c[CondKey]
	if !ok || cv == nil {
		for i := range v.Data {
			v.Data[i] = 1
		}
		return v, nil
	}
	if cv.Len() != channels {
		return nil, fmt.Errorf("conditioning %q has %d values for %d channels", CondKey, cv.Len(), channels)
	}
	copy(v.Data, cv.Data)
	return v, nil
}
