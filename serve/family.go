package serve

import (
	"context"
	"errors"
	"fmt"
	"image"
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

	mu sync.Mutex
	s  family.Sampler // nil once closed
}

var (
	_ Generator   = (*FamilyGenerator)(nil)
	_ ParamsModel = (*FamilyGenerator)(nil)
)

// OpenFamily loads the conditioning and decoding roles of spec's family from spec.Dir.
func OpenFamily(spec ModelSpec) (*FamilyGenerator, error) {
	f, ok := family.Lookup(spec.Name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoGenerator, spec.Name)
	}
	if f.NeedsDir() && spec.Dir == "" {
		return nil, fmt.Errorf("serve: model %q needs a checkpoint folder", spec.Name)
	}
	s, err := f.Open(spec.Dir, family.Options{Variant: spec.Variant, Backend: spec.Backend,
		Roles: family.Roles{Condition: true, Decode: true}})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return NewFamilyGenerator(s, spec), nil
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
	return &FamilyGenerator{defaults: d, check: s.Validate, s: s}
}

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
	it, err := g.s.Prepare(ctx, family.Input{Image: img}, family.Params(p), sc, []int64{JobSample})
	if err != nil {
		return nil, fmt.Errorf("serve: prepare: %w", err)
	}
	return &Sample{Latent: it.Latent, Cond: it.Cond[0], Guidance: it.Guidance}, nil
}

// Decode implements Generator: the family's Decode of latent [1, T, C, h, w].
func (g *FamilyGenerator) Decode(ctx context.Context, latent *tensor.Dense, p Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.s == nil {
		return nil, ErrGeneratorClosed
	}
	return g.s.Decode(ctx, latent, family.Params(p))
}
