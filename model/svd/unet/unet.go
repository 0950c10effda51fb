package unet

import (
	"errors"
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrConfig: the config describes a network this package cannot build.
	ErrConfig = errors.New("unet: unsupported config")
	// ErrInput: an input tensor has the wrong rank or shape.
	ErrInput = errors.New("unet: invalid input")
)

// Resnet GroupNorm eps per block kind, as diffusers wires them.
const (
	epsDown      = 1e-5 // DownBlockSpatioTemporal
	epsCrossDown = 1e-6 // CrossAttnDownBlockSpatioTemporal
	epsMid       = 1e-5 // UNetMidBlockSpatioTemporal
	epsUp        = 1e-6 // both up block kinds (class default)
	epsOut       = 1e-5 // conv_norm_out
)

// checkConfig reports configs that diffusers accepts at construction but that cannot run
// (or that this package does not build): every block reading encoder_hidden_states must
// share its width.
func checkConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n := cfg.NumBlocks()
	d := cfg.CrossAttentionDim[n-1]
	for i := range n {
		if (cfg.DownHasAttention(i) || cfg.UpHasAttention(n-1-i)) && cfg.CrossAttentionDim[i] != d {
			return fmt.Errorf("%w: %s: cross_attention_dim %v differs between blocks that share encoder_hidden_states", ErrConfig, cfg.Path, cfg.CrossAttentionDim)
		}
	}
	return nil
}

// checkInputShapes validates the input dimensions against cfg (shared by Build and
// Model.Forward); timestep may be a scalar (nil), [1] or [B].
func checkInputShapes(cfg Config, sample, timestep, ehs, ids []int) error {
	if len(sample) != 5 || sample[2] != cfg.InChannels || sample[0] <= 0 || sample[1] <= 0 {
		return fmt.Errorf("%w: sample %v, want [B, T, %d, h, w]", ErrInput, sample, cfg.InChannels)
	}
	b := sample[0]
	switch {
	case len(timestep) == 0:
	case len(timestep) == 1 && (timestep[0] == 1 || timestep[0] == b):
	default:
		return fmt.Errorf("%w: timestep %v, want a scalar, [1] or [%d]", ErrInput, timestep, b)
	}
	d := cfg.CrossAttentionDim[cfg.NumBlocks()-1]
	if len(ehs) != 3 || ehs[0] != b || ehs[1] <= 0 || ehs[2] != d {
		return fmt.Errorf("%w: encoder_hidden_states %v, want [%d, S, %d]", ErrInput, ehs, b, d)
	}
	if k := cfg.NumAddedTimeIDs(); len(ids) != 2 || ids[0] != b || ids[1] != k {
		return fmt.Errorf("%w: added_time_ids %v, want [%d, %d]", ErrInput, ids, b, k)
	}
	return nil
}

// Build builds the forward graph of the UNet: sample [B, T, Cin, h, w], timestep [B], [1]
// or a scalar, ehs (encoder_hidden_states) [B, S, D] and addedTimeIDs [B, K] give
// [B, T, Cout, h, w]. Weights are read through s with their diffusers names. It panics
// (GoMLX's convention; nn.Program.Run returns the panic as an error) on an unsupported
// config, inconsistent input shapes or a missing / mis-shaped weight.
func Build(s nn.Scope, cfg Config, sample, timestep, ehs, addedTimeIDs *Node) *Node {
	l := newGraphLayers(s, cfg, sample, timestep, ehs, addedTimeIDs)
	return l.run(l)
}

// newGraphLayers checks the config and the input shapes and starts the layer sequence at
// the sample.
func newGraphLayers(s nn.Scope, cfg Config, sample, timestep, ehs, addedTimeIDs *Node) *graphLayers {
	if err := checkConfig(cfg); err != nil {
		panic(err)
	}
	if err := checkInputShapes(cfg, sample.Shape().Dimensions, timestep.Shape().Dimensions,
		ehs.Shape().Dimensions, addedTimeIDs.Shape().Dimensions); err != nil {
		panic(err)
	}
	sd := sample.Shape().Dimensions
	return &graphLayers{s: s, cfg: cfg, f: frames{b: sd[0], t: sd[1]}, h: sd[3], w: sd[4],
		x: sample, timestep: timestep, ehs: ehs, ids: addedTimeIDs}
}

// run walks the layer sequence through via (l itself, or a wrapper that drops part of it)
// and returns the prediction [B, T, Cout, h, w].
func (l *graphLayers) run(via layers) *Node {
	walk(l.cfg, l.h, l.w, via)
	return Reshape(l.x, l.f.b, l.f.t, l.cfg.OutChannels, l.h, l.w)
}

// graphLayers builds the layer sequence as one graph: the whole video is here, so the
// layers that mix frames see every frame.
type graphLayers struct {
	s                  nn.Scope
	cfg                Config
	f                  frames
	h, w               int // the latent size
	timestep, ehs, ids *Node
	emb                *Node // [B·T, E]
	x                  *Node
	skips              []*Node
	feature            *Node   // DeepCache's feature [B·T, C, h', w'], saved or to load
	skipsOut, skipsIn  []*Node // a probe's skips, saved or to load (deepcache.go)
}

func (l *graphLayers) embed() {
	l.emb = repeatInterleave(embedding(l.s, l.cfg, l.timestep, l.ids), l.f.t)
}

func (l *graphLayers) apply(_ string, f func(s nn.Scope, x *Node) *Node) { l.x = f(l.s, l.x) }

func (l *graphLayers) resBlock(path string, cout int, eps float64) {
	l.x = spatioTemporalResBlock(l.s.In(path), l.x, l.emb, l.f, cout, eps)
}

// transformer passes ehs [B, S, D] once per video: the blocks repeat it per frame / pixel.
func (l *graphLayers) transformer(path string, a attnSpec) {
	l.x = transformerSpatioTemporal(l.s.In(path), l.x, l.ehs, l.f, a)
}

func (l *graphLayers) pushSkip() { l.skips = append(l.skips, l.x) }

func (l *graphLayers) popSkip() {
	skip := l.skips[len(l.skips)-1]
	l.skips = l.skips[:len(l.skips)-1]
	l.x = Concatenate([]*Node{l.x, skip}, 1)
}

// spec returns the transformer shape of layer l of the blocks with per-block index i.
func spec(cfg Config, i, l int) attnSpec {
	h := cfg.NumAttentionHeads[i]
	return attnSpec{heads: h, headDim: cfg.BlockOutChannels[i] / h, layers: cfg.TransformerLayers(i, l)}
}

// repeatInterleave repeats every row of x [B, ...] t times: [B·t, ...] (torch's
// repeat_interleave on dim 0).
func repeatInterleave(x *Node, t int) *Node {
	d := x.Shape().Dimensions
	bd := append([]int{d[0], t}, d[1:]...)
	rd := append([]int{d[0] * t}, d[1:]...)
	return Reshape(BroadcastToDims(InsertAxes(x, 1), bd...), rd...)
}
