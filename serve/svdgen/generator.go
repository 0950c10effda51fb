package svdgen

import (
	"context"
	"errors"
	"fmt"
	"image"
	"sync"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/tensor"
)

// Name is the model name the Generator is registered under.
const Name = "svd"

// Sample is the noise stream index of a job: every job is sample 0 of its seed, as the
// first sample of `vdpp generate`.
const Sample = 0

// ErrClosed is returned by a Generator used after Close.
var ErrClosed = errors.New("svdgen: generator closed")

func init() {
	serve.RegisterGenerator(Name, func(spec serve.ModelSpec) (serve.Generator, error) { return Open(spec) })
}

// Generator is the SVD serve.Generator. It holds the image encoder, the VAE encoder and the
// VAE decoder of one checkpoint (no UNet) and runs one of them at a time; parameter checks
// read only the configs and never wait for a running network.
type Generator struct {
	// cfg holds the checkpoint's configs only (no networks); it never changes.
	cfg *svd.Pipeline
	// decodeChunk is the default decode_chunk_size (ModelSpec.DecodeChunkSize).
	decodeChunk int
	// guidance, when set, is the default min and max guidance (ModelSpec).
	guidance *[2]float64

	mu sync.Mutex
	p  *svd.Pipeline // nil once closed
}

var (
	_ serve.Generator   = (*Generator)(nil)
	_ serve.ParamsModel = (*Generator)(nil)
)

// Open loads the conditioning and decoding parts of the checkpoint spec.Dir (weights
// variant spec.Variant) on the GoMLX backend spec.Backend.
func Open(spec serve.ModelSpec) (*Generator, error) {
	if spec.Dir == "" {
		return nil, fmt.Errorf("svdgen: model %q needs a checkpoint folder", spec.Name)
	}
	b, err := nn.NewBackend(spec.Backend)
	if err != nil {
		return nil, fmt.Errorf("svdgen: %w", err)
	}
	p, err := svd.Load(spec.Dir, spec.Variant, b, svd.Parts{Conditioner: true, Decoder: true})
	if err != nil {
		return nil, fmt.Errorf("svdgen: %w", err)
	}
	g := New(p)
	g.decodeChunk = max(spec.DecodeChunkSize, 0)
	if spec.MinGuidance != 0 || spec.MaxGuidance != 0 {
		g.guidance = &[2]float64{spec.MinGuidance, spec.MaxGuidance}
	}
	return g, nil
}

// New wraps an already loaded pipeline, which must hold the conditioner and the decoder;
// the Generator owns it from now on (Close closes it).
func New(p *svd.Pipeline) *Generator {
	cfg := &svd.Pipeline{UNetConfig: p.UNetConfig, VAEConfig: p.VAEConfig, CLIPConfig: p.CLIPConfig, Features: p.Features, Sched: p.Sched}
	return &Generator{cfg: cfg, p: p}
}

// Close releases the loaded networks; it waits for a call in progress.
func (g *Generator) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.p == nil {
		return nil
	}
	err := g.p.Close()
	g.p = nil
	return err
}

// pipeline returns the loaded pipeline; the caller holds g.mu.
func (g *Generator) pipeline() (*svd.Pipeline, error) {
	if g.p == nil {
		return nil, ErrClosed
	}
	return g.p, nil
}

// DefaultParams implements serve.ParamsModel: SVD's defaults with the checkpoint's frame
// count (the UNet config's num_frames) and native size, as `vdpp generate`; the server's 14
// frames when the config has none; the model spec's decode chunk and guidance.
func (g *Generator) DefaultParams() serve.Params {
	p := FromSVD(g.cfg.DefaultParams())
	p.DecodeChunkSize = g.decodeChunk
	if g.guidance != nil {
		p.MinGuidance, p.MaxGuidance = g.guidance[0], g.guidance[1]
	}
	if p.NumFrames < 1 {
		p.NumFrames = serve.DefaultParams().NumFrames
	}
	return p
}

// CheckParams implements serve.ParamsModel with the pipeline's own validation (sizes that
// are multiples of the VAE's downsampling factor, min guidance <= max guidance).
func (g *Generator) CheckParams(p serve.Params) error {
	if err := g.cfg.Validate(ToSVD(p)); err != nil {
		return fmt.Errorf("%w: %w", serve.ErrBadParams, err)
	}
	return nil
}

// Prepare implements serve.Generator: sample 0's noise for p.Seed (augmentation noise, then
// the initial latent noise), the image's CLIP and VAE inputs, the conditioning, the initial
// latent times init_noise_sigma and, when guided, the per-frame guidance weights.
func (g *Generator) Prepare(ctx context.Context, img image.Image, p serve.Params, sc *sched.Euler) (*serve.Sample, error) {
	if img == nil {
		return nil, fmt.Errorf("svdgen: prepare: no image")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pr := ToSVD(p)
	if len(sc.Timesteps) != pr.Steps {
		return nil, fmt.Errorf("svdgen: prepare: a schedule of %d steps for a job of %d", len(sc.Timesteps), pr.Steps)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sp, err := g.pipeline()
	if err != nil {
		return nil, err
	}
	if err := sp.Validate(pr); err != nil {
		return nil, fmt.Errorf("%w: %w", serve.ErrBadParams, err)
	}
	aug, init := sp.Noise(pr, Sample)
	clipPixels, vaeImage, err := sp.Preprocess(img, pr)
	if err != nil {
		return nil, fmt.Errorf("svdgen: prepare: %w", err)
	}
	c, err := sp.Condition(clipPixels, vaeImage, aug, pr)
	if err != nil {
		return nil, fmt.Errorf("svdgen: prepare: %w", err)
	}
	for i, v := range init.Data {
		init.Data[i] = v * sc.InitNoiseSigma
	}
	s := &serve.Sample{Latent: init, Cond: c.Cond}
	if pr.Guided() {
		s.Guidance = sched.GuidanceWeights(float32(pr.MinGuidance), float32(pr.MaxGuidance), pr.NumFrames)
	}
	return s, nil
}

// Decode implements serve.Generator: the VAE decode of latent [1, T, C, h, w] in chunks of
// p.DecodeChunkSize frames, mapped to [0, 1]; frames [T, 3, p.Height, p.Width].
func (g *Generator) Decode(ctx context.Context, latent *tensor.Dense, p serve.Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sp, err := g.pipeline()
	if err != nil {
		return nil, err
	}
	pr := ToSVD(p)
	want := append([]int{1}, sp.LatentShape(pr)...)
	if !sameInts(latent.Shape, want) {
		return nil, fmt.Errorf("svdgen: decode: latent %v, want %v for %d frames of %dx%d", latent.Shape, want, p.NumFrames, p.Width, p.Height)
	}
	raw, err := sp.Decode(latent, pr.DecodeChunkSize)
	if err != nil {
		return nil, fmt.Errorf("svdgen: %w", err)
	}
	return svd.ToUnit(raw), nil
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
