package serve

import (
	"context"
	"errors"
	"fmt"
	"image"
	"slices"
	"sync"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// ErrGeneratorClosed is returned by a FamilyGenerator used after Close.
var ErrGeneratorClosed = errors.New("serve: generator closed")

// JobSample is the noise stream index of a job: every job is sample 0 of its seed, as the
// first sample of `vdpp generate`.
const JobSample = 0

// FamilyGenerator is the Generator of a model family's folder (SVD, the built-in model):
// the coordinator's share of the family's family.Sampler, loaded with the conditioning and
// decoding roles (no denoiser). It runs one call at a time; parameter checks never wait
// for a running network.
type FamilyGenerator struct {
	// defaults are the parameters of a job whose JSON leaves them out; they never change.
	defaults Params
	// check validates parameters against the checkpoint's configs; it never changes.
	check func(family.Params) error
	// act estimates a step's working memory (nil when the family has no estimate); it only
	// reads configs, so it needs no lock.
	act ActivationFunc

	// text says the family is conditioned on prompts (Wan) rather than on an image: its
	// first-stage role loaded the text encoder, and jobs give a prompt.
	text bool
	// desc describes the model's long-video windowing (native length, the VAE's temporal
	// factor, the family's default window); it never changes.
	desc family.Description

	mu sync.Mutex
	s  family.Sampler // nil once closed
}

var (
	_ Generator       = (*FamilyGenerator)(nil)
	_ ParamsModel     = (*FamilyGenerator)(nil)
	_ PromptGenerator = (*FamilyGenerator)(nil)
	_ CostModel       = (*FamilyGenerator)(nil)
	_ WindowedModel   = (*FamilyGenerator)(nil)
)

// OpenFamily loads the conditioning and decoding roles of spec's family from spec.Dir:
// for a text-to-video family (its folder's Description has a TextDim) the conditioner is
// the tokenizer and text encoder, and a folder without them is refused.
func OpenFamily(spec ModelSpec) (*FamilyGenerator, error) {
	f, ok := family.Lookup(spec.Name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoGenerator, spec.Name)
	}
	if f.NeedsDir() && spec.Dir == "" {
		return nil, fmt.Errorf("serve: model %q needs a checkpoint folder", spec.Name)
	}
	desc, err := f.Describe(spec.Dir)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	text := desc.TextDim > 0
	s, err := f.Open(spec.Dir, family.Options{Variant: spec.Variant, Backend: spec.Backend,
		Roles: family.Roles{Condition: true, Decode: true}, Prompts: text, Progress: spec.LoadProgress})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	g := NewFamilyGenerator(s, spec)
	g.text = text
	if desc.Defaults.NumFrames > 0 {
		g.desc = desc
	}
	return g, nil
}

// NewFamilyGenerator wraps a loaded sampler (conditioning and decoding roles), which it owns
// from now on. A job's defaults are the sampler's, with spec's decode chunk, spec's guidance
// where it sets one, and the server's frame count where the checkpoint has none.
func NewFamilyGenerator(s family.Sampler, spec ModelSpec) *FamilyGenerator {
	d := Params(s.DefaultParams())
	d.DecodeChunkSize = max(spec.DecodeChunkSize, 0)
	if spec.MinGuidance != 0 || spec.MaxGuidance != 0 {
		d.MinGuidance, d.MaxGuidance = spec.MinGuidance, spec.MaxGuidance
	}
	if d.NumFrames < 1 {
		d.NumFrames = DefaultParams().NumFrames
	}
	g := &FamilyGenerator{defaults: d, check: s.Validate, s: s, desc: family.Description{Defaults: family.Params(d)}}
	if est, ok := s.(family.ActivationEstimator); ok {
		g.act = func(p Params) int64 { return est.StepActivationBytes(family.Params(p)) }
	}
	return g
}

// Description implements WindowedModel: the family's description of the folder.
func (g *FamilyGenerator) Description() family.Description { return g.desc }

// Activation implements CostModel with the family's family.ActivationEstimator.
func (g *FamilyGenerator) Activation() ActivationFunc { return g.act }

// Close releases the loaded networks; it waits for a call in progress.
func (g *FamilyGenerator) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.s == nil {
		return nil
	}
	err := g.s.Close()
	g.s = nil
	return err
}

// DefaultParams implements ParamsModel.
func (g *FamilyGenerator) DefaultParams() Params { return g.defaults }

// CheckParams implements ParamsModel with the family's own validation (sizes the VAE can
// take, min guidance <= max guidance).
func (g *FamilyGenerator) CheckParams(p Params) error {
	if err := g.check(family.Params(p)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadParams, err)
	}
	return nil
}

// Prepare implements Generator: the family's Prepare of sample JobSample for p.Seed.
func (g *FamilyGenerator) Prepare(ctx context.Context, img image.Image, p Params, sc sched.Scheduler) (*Sample, error) {
	if img == nil {
		return nil, fmt.Errorf("serve: prepare: no image")
	}
	return g.prepare(ctx, family.Input{Image: img}, p, sc)
}

// TextConditioned implements PromptGenerator.
func (g *FamilyGenerator) TextConditioned() bool { return g.text }

// PreparePrompt implements PromptGenerator: the family's Prepare of sample JobSample for
// the prompt; the text encoder encodes each text once (the negative prompt, shared by
// most jobs, stays cached).
func (g *FamilyGenerator) PreparePrompt(ctx context.Context, pr family.Prompt, p Params, sc sched.Scheduler) (*Sample, error) {
	if !g.text {
		return nil, fmt.Errorf("%w: the model is image-conditioned and takes no prompt", ErrBadParams)
	}
	return g.prepare(ctx, family.Input{Prompt: &pr}, p, sc)
}

func (g *FamilyGenerator) prepare(ctx context.Context, in family.Input, p Params, sc sched.Scheduler) (*Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.s == nil {
		return nil, ErrGeneratorClosed
	}
	if err := g.check(family.Params(p)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadParams, err)
	}
	it, err := g.s.Prepare(ctx, in, family.Params(p), sc, []int64{JobSample})
	if err != nil {
		return nil, fmt.Errorf("serve: prepare: %w", err)
	}
	return &Sample{Latent: it.Latent, Cond: it.Cond[0], Guidance: it.Guidance, Windows: g.desc.Windows(family.Params(p), g.s)}, nil
}

// Decode implements Generator: the family's Decode of latent [1, T, C, h, w], through its
// family.ChunkDecoder where it has one, so the decoder's working memory is one chunk
// group's rather than the whole video's (the frames are the same bits).
func (g *FamilyGenerator) Decode(ctx context.Context, latent *tensor.Dense, p Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.s == nil {
		return nil, ErrGeneratorClosed
	}
	if cd, ok := g.s.(family.ChunkDecoder); ok {
		return decodeByChunks(ctx, cd, latent, family.Params(p))
	}
	return g.s.Decode(ctx, latent, family.Params(p))
}

// decodeByChunks joins the frames cd.DecodeChunks emits, in order, into Decode's
// [T, 3, H, W]; room for p.NumFrames frames is taken up front.
func decodeByChunks(ctx context.Context, cd family.ChunkDecoder, latent *tensor.Dense, p family.Params) (*tensor.Dense, error) {
	var data []float32
	var frame []int // [3, H, W] of every frame
	frames := 0
	err := cd.DecodeChunks(ctx, latent, p, func(first int, f *tensor.Dense) error {
		if len(f.Shape) != 4 || tensor.NumElements(f.Shape) != len(f.Data) {
			return fmt.Errorf("serve: decoded chunk of shape %v with %d values, want [k, 3, H, W]", f.Shape, len(f.Data))
		}
		if frame == nil {
			frame = slices.Clone(f.Shape[1:])
			data = make([]float32, 0, max(p.NumFrames, f.Shape[0])*tensor.NumElements(frame))
		}
		if first != frames || !slices.Equal(f.Shape[1:], frame) {
			return fmt.Errorf("serve: decoded chunk at frame %d of shape %v after %d frames of %v", first, f.Shape, frames, frame)
		}
		data = append(data, f.Data...)
		frames += f.Shape[0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	if frames == 0 {
		return nil, fmt.Errorf("serve: the decoder emitted no frames")
	}
	return &tensor.Dense{Shape: append([]int{frames}, frame...), Data: data}, nil
}
