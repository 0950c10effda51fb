package vae

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrNoEncoder: Encode on a Model loaded without its encoder.
	ErrNoEncoder = errors.New("vae: encoder not loaded")
	// ErrNoDecoder: Decode on a Model loaded without its decoder.
	ErrNoDecoder = errors.New("vae: decoder not loaded")
	// ErrInput: an input tensor has the wrong rank or channel count.
	ErrInput = errors.New("vae: bad input")
)

// Posterior is the diagonal Gaussian over latents that Encode returns, each [N, latent, h, w]
// except Moments [N, 2·latent, h, w] (the quant_conv output: mean then raw logvar).
type Posterior struct {
	Moments, Mean, LogVar, Std *tensor.Dense
}

// Mode returns the posterior's mode, its mean.
func (p Posterior) Mode() *tensor.Dense { return p.Mean }

// Model is a loaded AutoencoderKLTemporalDecoder (or one half of it). It is safe for
// concurrent use.
type Model struct {
	cfg     Config
	weights *nn.Weights
	enc     *nn.Program // nil without the encoder
	dec     *nn.Program // nil without the decoder
	rowPar  int         // chunks Decode runs at once (nn.RowParallelism)
	tiling  Tiling      // spatial tiles of Decode and Encode (WithTiling); zero: none
}

// Load reads vae/config.json and the vae weights of variant ("" for fp32, "fp16", ...) from
// ck and builds the full model on backend.
func Load(ck *checkpoint.Checkpoint, variant string, backend backends.Backend) (*Model, error) {
	return LoadParts(ck, variant, backend, true, true)
}

// LoadParts is Load keeping only the encoder and/or the decoder: the other half's tensors
// are skipped (not read, not held), and calling it returns ErrNoEncoder / ErrNoDecoder.
func LoadParts(ck *checkpoint.Checkpoint, variant string, backend backends.Backend, encoder, decoder bool) (*Model, error) {
	cfg, err := ReadConfig(ck)
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	all, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	want := map[string][]int{}
	var skip []string
	for name, shape := range all {
		if dec := isDecoderTensor(name); (dec && decoder) || (!dec && encoder) {
			want[name] = shape
		} else {
			skip = append(skip, name)
		}
	}
	sort.Strings(skip)
	if !encoder && !decoder {
		return nil, fmt.Errorf("%w: neither encoder nor decoder requested", ErrInput)
	}
	st, err := ck.OpenComponent(Component, variant, want, checkpoint.LoadOptions{Ignore: skip})
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	defer st.Close()
	w, err := nn.NewWeightsStream(backend, st.Each)
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	return bind(cfg, w, backend, encoder, decoder)
}

// New builds the full model from cfg and weights named as the diffusers state_dict, which
// must hold exactly ExpectedTensors(cfg). The weights are copied onto backend.
func New(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend) (*Model, error) {
	return newParts(cfg, weights, backend, true, true)
}

// NewParts is New for a model holding only the encoder and/or the decoder; weights must
// hold exactly the tensors of those halves.
func NewParts(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend, encoder, decoder bool) (*Model, error) {
	return newParts(cfg, weights, backend, encoder, decoder)
}

// newParts checks weights against the requested halves, uploads them and builds the programs.
func newParts(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend, encoder, decoder bool) (*Model, error) {
	if !encoder && !decoder {
		return nil, fmt.Errorf("%w: neither encoder nor decoder requested", ErrInput)
	}
	want, err := expectedParts(cfg, encoder, decoder)
	if err != nil {
		return nil, err
	}
	if _, err := nn.CheckWeights(want, weights); err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	w, err := nn.NewWeights(backend, weights)
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	return bind(cfg, w, backend, encoder, decoder)
}

// bind builds the programs of the requested halves over weights already on backend.
func bind(cfg Config, w *nn.Weights, backend backends.Backend, encoder, decoder bool) (*Model, error) {
	var err error
	m := &Model{cfg: cfg, weights: w, rowPar: nn.RowParallelism(backend)}
	if encoder {
		m.enc, err = nn.NewProgram(backend, w, "vae.encode", func(s nn.Scope, in []*graph.Node) []*graph.Node {
			o := buildEncoder(s, in[0].Graph(), in[0], cfg)
			return []*graph.Node{o.moments, o.mean, o.logvar, o.std}
		})
		if err != nil {
			return nil, fmt.Errorf("vae: %w", err)
		}
	}
	if decoder {
		m.dec, err = nn.NewProgram(backend, w, "vae.decode", func(s nn.Scope, in []*graph.Node) []*graph.Node {
			z := in[0]
			return []*graph.Node{buildDecoder(s, z.Graph(), z, z.Shape().Dim(0), cfg)}
		})
		if err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("vae: %w", err)
		}
	}
	return m, nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// HasEncoder reports whether the encoder is loaded.
func (m *Model) HasEncoder() bool { return m.enc != nil }

// HasDecoder reports whether the decoder is loaded.
func (m *Model) HasDecoder() bool { return m.dec != nil }

// WeightBytes returns the memory held by the loaded weights (fp32).
func (m *Model) WeightBytes() int64 { return m.weights.Bytes() }

// Close releases the compiled programs. The Model must not be used afterwards.
func (m *Model) Close() error {
	var errs []error
	for _, p := range []*nn.Program{m.enc, m.dec} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	m.enc, m.dec = nil, nil
	return errors.Join(errs...)
}

// Encode runs the encoder on image [N, in_channels, H, W] (values in [-1, 1]; H and W need
// not be equal) and returns the posterior, whose tensors are [N, latent, h, w] with each
// downsampling level mapping a side s to ⌊s/2⌋ (h = H/f when f divides H).
func (m *Model) Encode(image *tensor.Dense) (Posterior, error) {
	if m.enc == nil {
		return Posterior{}, ErrNoEncoder
	}
	if err := checkInput(image, m.cfg.InChannels, "image"); err != nil {
		return Posterior{}, err
	}
	if t := m.tiling.Sample; t > 0 && (image.Shape[2] > t || image.Shape[3] > t) {
		p, err := m.encodeTiled(image)
		if err != nil {
			return Posterior{}, fmt.Errorf("vae: encode %v: %w", image.Shape, err)
		}
		return p, nil
	}
	out, err := m.enc.Run(image)
	if err != nil {
		return Posterior{}, fmt.Errorf("vae: encode %v: %w", image.Shape, err)
	}
	return Posterior{Moments: out[0], Mean: out[1], LogVar: out[2], Std: out[3]}, nil
}

// Decode runs the temporal decoder on the latents of one video's frames [F, latent, h, w]
// (already divided by the scaling factor) and returns frames [F, out_channels, h·f, w·f]
// (about [-1, 1]). With chunk <= 0 or chunk >= F all frames are decoded together
// (vae.decode(z, num_frames=F)); otherwise frames are decoded in consecutive chunks of
// chunk frames (the last chunk shorter), each with num_frames = its length, and
// concatenated — the temporal layers then see only a chunk's frames. Chunks are independent,
// so on a backend that runs ops on one core (simplego) nn.RowParallelism of them run at
// once; the result is the same as one after another.
func (m *Model) Decode(latents *tensor.Dense, chunk int) (*tensor.Dense, error) {
	if m.dec == nil {
		return nil, ErrNoDecoder
	}
	if err := checkInput(latents, m.cfg.LatentChannels, "latents"); err != nil {
		return nil, err
	}
	f := latents.Shape[0]
	if chunk <= 0 || chunk >= f {
		out, err := m.runDecode(latents)
		if err != nil {
			return nil, fmt.Errorf("vae: decode %v: %w", latents.Shape, err)
		}
		return out, nil
	}
	out, err := nn.RunSplit(tensor.Chunks(f, 0, chunk), m.rowPar, func(start, end int) (*tensor.Dense, error) {
		out, err := m.runDecode(latents.Rows(start, end))
		if err != nil {
			return nil, fmt.Errorf("vae: decode frames [%d, %d) of %v: %w", start, end, latents.Shape, err)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeChunks decodes as Decode does (chunk <= 0 or >= F: all frames together) and hands
// the frames to emit as soon as they exist, in order: the chunks run a group of
// nn.RowParallelism at a time, and each group's frames [k, out_channels, h·f, w·f] go to
// emit with the index of their first frame before the next group starts, so only one
// group's frames and activations are live at once. The frames are Decode's, bit for bit.
func (m *Model) DecodeChunks(latents *tensor.Dense, chunk int, emit func(first int, frames *tensor.Dense) error) error {
	if m.dec == nil {
		return ErrNoDecoder
	}
	if err := checkInput(latents, m.cfg.LatentChannels, "latents"); err != nil {
		return err
	}
	f := latents.Shape[0]
	if chunk <= 0 || chunk >= f {
		chunk = f
	}
	chunks := tensor.Chunks(f, 0, chunk)
	group := max(1, m.rowPar)
	for g := 0; g < len(chunks); g += group {
		ranges := chunks[g:min(g+group, len(chunks))]
		first := ranges[0][0]
		out, err := nn.RunSplit(ranges, group, func(start, end int) (*tensor.Dense, error) {
			out, err := m.runDecode(latents.Rows(start, end))
			if err != nil {
				return nil, fmt.Errorf("vae: decode frames [%d, %d) of %v: %w", start, end, latents.Shape, err)
			}
			return out, nil
		})
		if err != nil {
			return err
		}
		if err := emit(first, out); err != nil {
			return err
		}
	}
	return nil
}

// checkInput checks that t is [N, channels, H, W] with N, H, W > 0.
func checkInput(t *tensor.Dense, channels int, what string) error {
	if t == nil {
		return fmt.Errorf("%w: %s is nil", ErrInput, what)
	}
	if len(t.Shape) != 4 || t.Shape[1] != channels || t.Shape[0] <= 0 || t.Shape[2] <= 0 || t.Shape[3] <= 0 {
		return fmt.Errorf("%w: %s %v is not [N, %d, H, W]", ErrInput, what, t.Shape, channels)
	}
	if len(t.Data) != tensor.NumElements(t.Shape) {
		return fmt.Errorf("%w: %s has %d values for shape %v", ErrInput, what, len(t.Data), t.Shape)
	}
	return nil
}
