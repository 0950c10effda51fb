// Package eval measures an image-to-video checkpoint on the held-out split of the
// procedural dataset (data/procedural): for each held-out clip the model generates a video
// from the clip's first frame, and every generated frame is compared with the true frame
// (PSNR and SSIM on [0, 1] RGB), next to two baselines: repeating the first frame, and the
// same model with a freshly initialised denoiser (family.Reinitializer; for SVD the UNet).
// Models are family.Samplers, run by Generate as every command runs them; the VAE round
// trip (Reconstructor) is the family.Reconstructor of those that have one. The report
// keeps every clip's own scores, so Compare can pair two reports on the same clips: the
// A/B test of two models or two sampling settings, with the standard error of the
// difference.
//
// Contract: Run is deterministic for a given checkpoint, options and backend: clips come
// from the dataset seed, noise from the generation seed. Metrics are pure functions
// (PSNR, SSIM), and so is Compare; Run does no I/O besides what its Generator does; the
// JSON report is written by Report.WriteJSON and read by ReadReport.
//
// Command is `vdpp eval`: its flags (RegisterFlags) and the run around Run: the model opened
// through the family seam, the baselines, the step cache, the contact sheet and GIFs, the
// report file. Options the model cannot take are refused (ErrOptions) before any clip runs.
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"math"
	"os"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// Options configure Run.
type Options struct {
	Samples int // clips, indices 0..Samples-1 of the split
	// TrainSplit scores the first Samples clips of the training split instead of the
	// held-out one: a model trained on them scores higher there, and the gap to the
	// held-out score measures how much it memorised rather than learnt the rule.
	TrainSplit bool
	DataSeed   uint64          // dataset seed
	Rule       procedural.Rule // dataset rule (procedural.ConfigFor)
	Steps      int             // denoising steps
	Seed       int64           // generation seed
	Untrained  bool            // also evaluate the untrained-UNet baseline
	// MinGuidance and MaxGuidance are the guidance weights of the first and last frame the
	// generator uses; Run records them in the report.
	MinGuidance, MaxGuidance float64
	// Keep, when set, sees every clip's truth and generated video ([T, 3, H, W] in [0, 1]).
	Keep func(i int, truth, pred *tensor.Dense)
	// KeepReconstruction, when set with Reconstruct, sees every clip's VAE round trip
	// (after Keep has seen the clip).
	KeepReconstruction func(i int, rc *tensor.Dense)
	// Reconstruct, when set, autoencodes the truth (VAE upper bound on the PSNR).
	Reconstruct func(truth *tensor.Dense) (*tensor.Dense, error)
	// Reference, when set, generates every clip a second way (the same model without its
	// step cache, say), right after the model: the model's video is also scored against
	// the reference's (Report.Reference), and the reference against the truth.
	Reference Generator
}

// DefaultOptions evaluates 32 held-out clips with 25 steps: with 8, which clips happen to
// be drawn moved the model's margin over the repeat baseline by more than the margin itself.
func DefaultOptions() Options {
	return Options{Samples: 32, DataSeed: 1, Rule: procedural.DefaultRule, Steps: 25, Seed: 0, Untrained: true}
}

// Generator produces a video [T, 3, H, W] in [0, 1] from a first frame.
type Generator func(ctx context.Context, img image.Image, sample int64) (*tensor.Dense, error)

// Curve is a per-frame metric (index 0 is the first frame) and its mean over frames
// 2..N (indices 1..N-1), the frames the model has to predict.
type Curve struct {
	PerFrame   []float64 `json:"per_frame"`
	AfterFirst float64   `json:"after_first"`
}

// Report is the result of Run; the top-level *_after_first fields are what checks read.
type Report struct {
	Model                string  `json:"model"`
	Split                string  `json:"split"`
	Rule                 string  `json:"rule,omitempty"`
	DataSeed             uint64  `json:"data_seed,omitempty"`
	Seed                 int64   `json:"seed"`
	Samples              int     `json:"samples"`
	Steps                int     `json:"steps"`
	Frames               int     `json:"frames"`
	MinGuidance          float64 `json:"min_guidance"`
	MaxGuidance          float64 `json:"max_guidance"`
	DecodeChunk          int     `json:"decode_chunk_size,omitempty"` // frames decoded together (0: all); set by the caller
	PSNRAfterFirst       float64 `json:"psnr_after_first"`
	SSIMAfterFirst       float64 `json:"ssim_after_first"`
	RepeatPSNRAfterFirst float64 `json:"baseline_repeat_first_psnr_after_first"`
	RepeatSSIMAfterFirst float64 `json:"baseline_repeat_first_ssim_after_first"`
	UntrainedPSNR        float64 `json:"untrained_psnr_after_first"`
	UntrainedSSIM        float64 `json:"untrained_ssim_after_first"`
	PSNR                 Curve   `json:"psnr"`
	SSIM                 Curve   `json:"ssim"`
	RepeatPSNR           Curve   `json:"baseline_repeat_first_psnr"`
	RepeatSSIM           Curve   `json:"baseline_repeat_first_ssim"`
	UntrainedPSNRCurve   *Curve  `json:"untrained_psnr,omitempty"`
	UntrainedSSIMCurve   *Curve  `json:"untrained_ssim,omitempty"`
	VAEReconPSNR         float64 `json:"vae_reconstruction_psnr,omitempty"`
	VAEReconSSIM         float64 `json:"vae_reconstruction_ssim,omitempty"`
	WallS                float64 `json:"wall_s"`
	// Clips holds every clip's own scores, so two reports on the same clips can be
	// compared clip by clip (Compare); their means are the *_after_first fields.
	Clips []ClipScore `json:"clips,omitempty"`
	// Reference holds the scores against Options.Reference's videos (nil without one).
	Reference *ReferenceScores `json:"reference,omitempty"`
	// Cache is the step cache's record (set by the caller): the model's denoiser calls and
	// denoising time next to the reference's.
	Cache *CacheReport `json:"cache,omitempty"`
}

// ReferenceScores compare the model's videos with a reference generator's on the same
// clips (the uncached model, for a step cache): the model against the reference (per
// frame, and the mean over frames 2..N), and the reference against the truth.
type ReferenceScores struct {
	PSNRAfterFirst      float64 `json:"psnr_after_first"`
	SSIMAfterFirst      float64 `json:"ssim_after_first"`
	PSNR                Curve   `json:"psnr"`
	SSIM                Curve   `json:"ssim"`
	TruthPSNRAfterFirst float64 `json:"reference_psnr_after_first"`
	TruthSSIMAfterFirst float64 `json:"reference_ssim_after_first"`
	// MinPSNRAfterFirst and MinSSIMAfterFirst are the worst clip's.
	MinPSNRAfterFirst float64 `json:"min_clip_psnr_after_first"`
	MinSSIMAfterFirst float64 `json:"min_clip_ssim_after_first"`
}

// CacheReport is what a step cache did over an eval run, next to the reference run
// without it: the rule, the denoiser calls that ran in full out of all calls, and the time
// spent denoising (the step loops, summed over clips, interleaved with the reference's
// clip by clip).
type CacheReport struct {
	Rule               string  `json:"rule"`
	ComputedCalls      int     `json:"computed_calls"`
	Calls              int     `json:"calls"`
	SavedCalls         float64 `json:"saved_calls"` // 1 - computed / calls
	DiffusionS         float64 `json:"diffusion_s"`
	ReferenceDiffusion float64 `json:"reference_diffusion_s"`
	Speedup            float64 `json:"denoising_speedup"` // reference / cached denoising time
}

// NewCacheReport sums a cached run's and its reference's generation stats.
func NewCacheReport(rule string, cached, reference Stats) *CacheReport {
	r := &CacheReport{Rule: rule, ComputedCalls: cached.ComputedCalls, Calls: cached.Calls,
		DiffusionS: cached.Diffusion.Seconds(), ReferenceDiffusion: reference.Diffusion.Seconds()}
	if cached.Calls > 0 {
		r.SavedCalls = 1 - float64(cached.ComputedCalls)/float64(cached.Calls)
	}
	if cached.Diffusion > 0 {
		r.Speedup = reference.Diffusion.Seconds() / cached.Diffusion.Seconds()
	}
	return r
}

// ClipScore is one clip's mean over frames 2..N, for the model and the repeat baseline.
type ClipScore struct {
	Index                int     `json:"index"`
	PSNRAfterFirst       float64 `json:"psnr_after_first"`
	SSIMAfterFirst       float64 `json:"ssim_after_first"`
	RepeatPSNRAfterFirst float64 `json:"baseline_repeat_first_psnr_after_first"`
}

// WriteJSON writes the report to path.
func (r Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return nil
}

// accum sums per-frame metrics over clips.
type accum struct {
	psnr, ssim []float64
	n          int
}

func newAccum(t int) *accum { return &accum{psnr: make([]float64, t), ssim: make([]float64, t)} }

// add scores a predicted clip against the truth, both [T, 3, H, W] in [0, 1], and returns
// the clip's PSNR and SSIM means over frames 2..N.
func (a *accum) add(pred, truth *tensor.Dense) (psnr, ssim float64, err error) {
	if !tensor.SameShape(pred, truth) || len(truth.Shape) != 4 {
		return 0, 0, fmt.Errorf("eval: prediction %v and truth %v differ", pred.Shape, truth.Shape)
	}
	t, c, h, w := truth.Shape[0], truth.Shape[1], truth.Shape[2], truth.Shape[3]
	per := c * h * w
	ps, ss := make([]float64, t), make([]float64, t)
	for f := 0; f < t; f++ {
		p, q := pred.Data[f*per:(f+1)*per], truth.Data[f*per:(f+1)*per]
		if ps[f], err = PSNR(p, q); err != nil {
			return 0, 0, err
		}
		if ss[f], err = SSIM(p, q, c, h, w); err != nil {
			return 0, 0, err
		}
		a.psnr[f] += ps[f]
		a.ssim[f] += ss[f]
	}
	a.n++
	return MeanAfterFirst(ps), MeanAfterFirst(ss), nil
}

func (a *accum) curves() (Curve, Curve) {
	mk := func(s []float64) Curve {
		c := Curve{PerFrame: make([]float64, len(s))}
		for i, v := range s {
			c.PerFrame[i] = v / float64(max(a.n, 1))
		}
		c.AfterFirst = MeanAfterFirst(c.PerFrame)
		return c
	}
	return mk(a.psnr), mk(a.ssim)
}

// MeanAfterFirst is the mean of values[1:] (0 for fewer than two values).
func MeanAfterFirst(values []float64) float64 {
	if len(values) < 2 {
		return 0
	}
	var s float64
	for _, v := range values[1:] {
		s += v
	}
	return s / float64(len(values)-1)
}

// Truth returns held-out clip i of the dataset as [T, 3, H, W] in [0, 1] and its first
// frame.
func Truth(c procedural.Config, seed uint64, i int) (*tensor.Dense, image.Image) {
	return SplitTruth(c, seed, procedural.HeldOut, i)
}

// SplitTruth is Truth for clip i of any split.
func SplitTruth(c procedural.Config, seed uint64, split procedural.Split, i int) (*tensor.Dense, image.Image) {
	frames := procedural.Video(c, seed, split, i)
	t := procedural.ToTensor(frames)
	for j, v := range t.Data {
		t.Data[j] = (v + 1) / 2
	}
	return t, frames[0]
}

// RepeatFirst returns the clip's first frame repeated over all frames.
func RepeatFirst(truth *tensor.Dense) *tensor.Dense {
	out := tensor.New(truth.Shape...)
	per := len(truth.Data) / truth.Shape[0]
	for f := 0; f < truth.Shape[0]; f++ {
		copy(out.Data[f*per:(f+1)*per], truth.Data[:per])
	}
	return out
}

// Run evaluates gen (and untrained, when not nil) on o.Samples held-out clips (training
// clips with o.TrainSplit).
func Run(ctx context.Context, o Options, gen, untrained Generator, progress func(i int)) (Report, error) {
	dc := procedural.ConfigFor(o.Rule)
	split := procedural.HeldOut
	if o.TrainSplit {
		split = procedural.Train
	}
	model, rep, base, rec := newAccum(dc.Frames), newAccum(dc.Frames), newAccum(dc.Frames), newAccum(dc.Frames)
	vsRef, refTruth := newAccum(dc.Frames), newAccum(dc.Frames)
	minRef := [2]float64{math.Inf(1), math.Inf(1)}
	clips := make([]ClipScore, 0, o.Samples)
	for i := 0; i < o.Samples; i++ {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		truth, first := SplitTruth(dc, o.DataSeed, split, i)
		pred, err := gen(ctx, first, int64(i))
		if err != nil {
			return Report{}, fmt.Errorf("eval: clip %d: %w", i, err)
		}
		cs := ClipScore{Index: i}
		if cs.PSNRAfterFirst, cs.SSIMAfterFirst, err = model.add(pred, truth); err != nil {
			return Report{}, err
		}
		if cs.RepeatPSNRAfterFirst, _, err = rep.add(RepeatFirst(truth), truth); err != nil {
			return Report{}, err
		}
		clips = append(clips, cs)
		if o.Reference != nil {
			ref, err := o.Reference(ctx, first, int64(i))
			if err != nil {
				return Report{}, fmt.Errorf("eval: clip %d (reference): %w", i, err)
			}
			p, s, err := vsRef.add(pred, ref)
			if err != nil {
				return Report{}, err
			}
			minRef = [2]float64{min(minRef[0], p), min(minRef[1], s)}
			if _, _, err := refTruth.add(ref, truth); err != nil {
				return Report{}, err
			}
		}
		if o.Keep != nil {
			o.Keep(i, truth, pred)
		}
		if o.Reconstruct != nil {
			rc, err := o.Reconstruct(truth)
			if err != nil {
				return Report{}, fmt.Errorf("eval: clip %d (reconstruction): %w", i, err)
			}
			if _, _, err := rec.add(rc, truth); err != nil {
				return Report{}, err
			}
			if o.KeepReconstruction != nil {
				o.KeepReconstruction(i, rc)
			}
		}
		if untrained != nil {
			up, err := untrained(ctx, first, int64(i))
			if err != nil {
				return Report{}, fmt.Errorf("eval: clip %d (untrained): %w", i, err)
			}
			if _, _, err := base.add(up, truth); err != nil {
				return Report{}, err
			}
		}
		if progress != nil {
			progress(i)
		}
	}
	r := Report{Split: split.String(), Rule: o.Rule.String(), DataSeed: o.DataSeed, Seed: o.Seed, Samples: o.Samples, Steps: o.Steps,
		Frames: dc.Frames, MinGuidance: o.MinGuidance, MaxGuidance: o.MaxGuidance, Clips: clips}
	r.PSNR, r.SSIM = model.curves()
	r.RepeatPSNR, r.RepeatSSIM = rep.curves()
	r.PSNRAfterFirst, r.SSIMAfterFirst = r.PSNR.AfterFirst, r.SSIM.AfterFirst
	r.RepeatPSNRAfterFirst, r.RepeatSSIMAfterFirst = r.RepeatPSNR.AfterFirst, r.RepeatSSIM.AfterFirst
	if o.Reconstruct != nil {
		p, s := rec.curves()
		r.VAEReconPSNR, r.VAEReconSSIM = mean(p.PerFrame), mean(s.PerFrame)
	}
	if o.Reference != nil {
		p, s := vsRef.curves()
		tp, ts := refTruth.curves()
		r.Reference = &ReferenceScores{PSNRAfterFirst: p.AfterFirst, SSIMAfterFirst: s.AfterFirst, PSNR: p, SSIM: s,
			TruthPSNRAfterFirst: tp.AfterFirst, TruthSSIMAfterFirst: ts.AfterFirst, MinPSNRAfterFirst: minRef[0], MinSSIMAfterFirst: minRef[1]}
	}
	if untrained != nil {
		p, s := base.curves()
		r.UntrainedPSNRCurve, r.UntrainedSSIMCurve = &p, &s
		r.UntrainedPSNR, r.UntrainedSSIM = p.AfterFirst, s.AfterFirst
	}
	return r, nil
}

// PipelineGenerator returns a Generator running the sampler s with params pr in this
// process.
func PipelineGenerator(s family.Sampler, pr family.Params) Generator {
	return func(ctx context.Context, img image.Image, sample int64) (*tensor.Dense, error) {
		return Generate(ctx, s, img, pr, sample)
	}
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}

// ErrNoReconstruction is returned by Reconstructor for a family that cannot take frames
// through its VAE and back.
var ErrNoReconstruction = errors.New("eval: the model has no VAE round trip")

// Reconstructor returns the VAE round trip of s (family.Reconstructor) with pr's decode
// chunk, for truth videos [T, 3, H, W] in [0, 1].
func Reconstructor(ctx context.Context, s family.Sampler, pr family.Params) (func(truth *tensor.Dense) (*tensor.Dense, error), error) {
	rc, ok := s.(family.Reconstructor)
	if !ok {
		return nil, fmt.Errorf("%w (family %s)", ErrNoReconstruction, s.Family())
	}
	return func(truth *tensor.Dense) (*tensor.Dense, error) { return rc.Reconstruct(ctx, truth, pr) }, nil
}
