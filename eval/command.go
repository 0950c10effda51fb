package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/train"
)

// ErrOptions marks options `vdpp eval` refuses before it scores anything; it is a
// command-line mistake (cli.ErrUsage).
var ErrOptions = fmt.Errorf("eval: bad options: %w", cli.ErrUsage)

// badOptions is an error about the options, ErrOptions, whose message is fmt.Errorf's.
func badOptions(format string, a ...any) error { return cli.Errorf(ErrOptions, format, a...) }

// badParams is a model's refusal of the job in the command line's terms: a refused knob
// named by its flag (--cache-branch, not cache_branch), one line, still the knob's error.
func badParams(err error) error {
	if ke, ok := knob.AsError(err); ok {
		return cli.Errorf(ErrOptions, "%s%w", ke.In(knob.Flags), silent{ke})
	}
	return badOptions("%w", err)
}

// silent wraps an error without adding to the message.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }

// Command is `vdpp eval`'s flags: Run's Options and what the command does around the run
// (the model, the split, the media, the step cache, the report file).
type Command struct {
	Options
	// Model is the --model value: builtin or a model folder of an image-to-video family.
	Model   string
	JSON    string
	Backend string
	// Weights are the load options of the model's weights (--weights-dtype and the files).
	Weights family.WeightOptions
	// Split is "heldout" or "train" (procedural.ParseSplit).
	Split string
	// InitSeed seeds the untrained baseline's denoiser.
	InitSeed uint64
	// Sheet is a contact sheet PNG, GIFDir a folder of side-by-side GIFs, of the first
	// MediaClips clips.
	Sheet      string
	GIFDir     string
	MediaClips int
	// DecodeChunkSize is the frames decoded together (-1: the model's).
	DecodeChunkSize int
	// Recon also scores the VAE round trip.
	Recon bool
	// Cache is the step cache the model runs with (every clip then also runs without it).
	Cache cacheflag.Flags
}

// DefaultCommand are `vdpp eval`'s defaults: DefaultOptions on the built-in model, the
// model's guidance and decode chunk, the VAE round trip scored.
func DefaultCommand() Command {
	o := DefaultOptions()
	o.MinGuidance, o.MaxGuidance = -1, -1
	return Command{Options: o, Model: builtin.Name, Split: "heldout", InitSeed: 1, MediaClips: 4, DecodeChunkSize: -1,
		Recon: true, Cache: cacheflag.Default()}
}

// RegisterFlags binds the command's options to fs, with c's current values as defaults.
func (c *Command) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "the model `NAME|DIR`: builtin, a diffusers folder; a text-to-video one (builtin-wan, a Wan folder) with --cache only")
	fs.StringVar(&c.JSON, "json", c.JSON, "write the report as JSON to this file")
	fs.StringVar(&c.Backend, "backend", c.Backend, "GoMLX backend (default: automatic)")
	c.Weights.RegisterFlags(fs.FlagSet)
	fs.IntVar(&c.Samples, "num-samples", c.Samples, "clips to evaluate")
	fs.Alias("samples", "num-samples")
	fs.StringVar(&c.Split, "split", c.Split, "dataset split to score: heldout, or train (the first clips the model was trained on: the gap between the two measures memorisation)")
	fs.IntVar(&c.Steps, "steps", c.Steps, "denoising steps")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "generation seed")
	fs.Uint64Var(&c.DataSeed, "data-seed", c.DataSeed, "dataset seed")
	fs.Var(&c.Rule, "rule", procedural.RuleUsage)
	fs.BoolVar(&c.Untrained, "untrained", c.Untrained, "also evaluate the untrained-UNet baseline")
	fs.Float64Var(&c.MinGuidance, "min-guidance", c.MinGuidance, "first-frame guidance (-1: the model's vdpp_sampling.json: 2 for builtin; 1, as SVD, for a folder without one)")
	fs.Float64Var(&c.MaxGuidance, "max-guidance", c.MaxGuidance, "last-frame guidance (-1: the model's vdpp_sampling.json: 4 for builtin; 3, as SVD, for a folder without one)")
	fs.Uint64Var(&c.InitSeed, "init-seed", c.InitSeed, "seed of the untrained UNet's initial weights")
	fs.StringVar(&c.Sheet, "sheet", c.Sheet, "write a contact sheet PNG (rows: true clip, generated clip, VAE round trip with --recon) of the first clips")
	fs.StringVar(&c.GIFDir, "gif-dir", c.GIFDir, "write side-by-side GIFs (true | generated) of the first clips here")
	fs.IntVar(&c.MediaClips, "media-clips", c.MediaClips, "clips shown in --sheet and --gif-dir")
	fs.IntVar(&c.DecodeChunkSize, "decode-chunk-size", c.DecodeChunkSize, "frames the VAE decodes together (0: all; -1: the model's vdpp_sampling.json: 7 for builtin; all for a folder without one)")
	fs.BoolVar(&c.Recon, "recon", c.Recon, "also score the VAE round trip (an upper bound for the model)")
	c.Cache.Register(fs.FlagSet)
}

// Run is `vdpp eval`: it generates the clips of the split from their first frames with
// the model and scores them (Run) next to the baselines, writes the summary to stdout,
// the progress to progress, and the media and the report where the options say. With a
// step cache the model runs cached and every clip also uncached right after it: the report
// adds the scores against the uncached videos, the calls computed and both denoising
// times. Options the model cannot take are refused (ErrOptions) before any clip runs.
func (c Command) Run(ctx context.Context, stdout, progress io.Writer) (Report, error) {
	o := c.Options
	rule, err := c.Cache.Rule()
	if err != nil {
		return Report{}, badOptions("%w", err)
	}
	sp, err := procedural.ParseSplit(c.Split)
	if err != nil {
		return Report{}, badOptions("--split: %w", err)
	}
	o.TrainSplit = sp == procedural.Train
	resolved, err := family.Resolve(c.Model)
	if err != nil {
		return Report{}, badOptions("%w", err)
	}
	if rule, err = resolved.ResolveCache(rule, o.Steps); err != nil {
		return Report{}, badOptions("%w", err)
	}
	if resolved.Dir == "" {
		return Report{}, badOptions("--model %s has no image encoder or VAE: give a model folder or %q", c.Model, builtin.Name)
	}
	if desc, err := resolved.Describe(); err != nil {
		return Report{}, err
	} else if desc.TextDim > 0 {
		if !rule.On() {
			return Report{}, badOptions("--model %s is a text-to-video model, which has no clips to score against: eval measures its step cache (--cache MODE) against the same videos uncached", c.Model)
		}
		return Report{}, c.runTextCache(ctx, resolved, rule, stdout, progress)
	}
	s, err := resolved.Open(family.Options{Backend: c.Backend, Roles: family.AllRoles, Weights: c.Weights})
	if err != nil {
		return Report{}, err
	}
	defer s.Close()
	pr := s.DefaultParams() // guidance and decode chunk: the folder's vdpp_sampling.json
	pr.Height, pr.Width, pr.Steps, pr.Seed = 64, 64, o.Steps, o.Seed
	if o.MinGuidance >= 0 {
		pr.MinGuidance = o.MinGuidance
	}
	if o.MaxGuidance >= 0 {
		pr.MaxGuidance = o.MaxGuidance
	}
	if c.DecodeChunkSize >= 0 {
		pr.DecodeChunkSize = c.DecodeChunkSize
	}
	if pr.MinGuidance > pr.MaxGuidance {
		return Report{}, badOptions("--min-guidance %v > --max-guidance %v", pr.MinGuidance, pr.MaxGuidance)
	}
	o.MinGuidance, o.MaxGuidance = pr.MinGuidance, pr.MaxGuidance
	var untrained Generator
	if o.Untrained {
		ri, ok := s.(family.Reinitializer)
		if !ok {
			return Report{}, badOptions("--untrained: the %s family cannot reinitialise its denoiser (--untrained=false)", s.Family())
		}
		u, err := ri.WithDenoiserWeights(train.DenoiserInit(c.InitSeed))
		if err != nil {
			return Report{}, err
		}
		defer u.Close()
		untrained = PipelineGenerator(u, pr)
	}
	// With a step cache the model runs cached, and every clip also uncached right after it
	// (the reference its video is scored against; the two denoising times interleave).
	gen := PipelineGenerator(s, pr)
	var cached, uncached Stats
	if rule.On() {
		cpr := pr
		cpr.Cache = rule
		if err := s.Validate(cpr); err != nil {
			return Report{}, badParams(err)
		}
		gen = CountingGenerator(s, cpr, &cached)
		o.Reference = CountingGenerator(s, pr, &uncached)
	}
	m := &media{max: c.MediaClips, gifDir: c.GIFDir}
	o.Keep = m.keep
	if c.Recon {
		// decoded in the chunks generation uses
		if o.Reconstruct, err = Reconstructor(ctx, s, pr); err != nil {
			return Report{}, badOptions("--recon: %w (--recon=false)", err)
		}
		o.KeepReconstruction = m.keepReconstruction
	}
	start := time.Now()
	rep, err := Run(ctx, o, gen, untrained, func(i int) {
		fmt.Fprintf(progress, "eval: clip %d/%d (%.0fs)\n", i+1, o.Samples, time.Since(start).Seconds())
	})
	if err != nil {
		return rep, err
	}
	rep.Model, rep.DecodeChunk, rep.WallS = c.Model, pr.DecodeChunkSize, time.Since(start).Seconds()
	fmt.Fprintf(stdout, "%s clips %d, %d steps: mean over frames 2..%d\n", rep.Split, o.Samples, o.Steps, rep.Frames)
	fmt.Fprintf(stdout, "  model            PSNR %6.2f dB  SSIM %.4f\n", rep.PSNRAfterFirst, rep.SSIMAfterFirst)
	fmt.Fprintf(stdout, "  repeat frame 1   PSNR %6.2f dB  SSIM %.4f\n", rep.RepeatPSNRAfterFirst, rep.RepeatSSIMAfterFirst)
	if o.Untrained {
		fmt.Fprintf(stdout, "  untrained UNet   PSNR %6.2f dB  SSIM %.4f\n", rep.UntrainedPSNR, rep.UntrainedSSIM)
	}
	if c.Recon {
		fmt.Fprintf(stdout, "  VAE round trip   PSNR %6.2f dB  SSIM %.4f (all frames)\n", rep.VAEReconPSNR, rep.VAEReconSSIM)
	}
	if rule.On() {
		rep.Cache = NewCacheReport(rule.String(), cached, uncached)
		r, cr := rep.Reference, rep.Cache
		fmt.Fprintf(stdout, "  uncached model   PSNR %6.2f dB  SSIM %.4f\n", r.TruthPSNRAfterFirst, r.TruthSSIMAfterFirst)
		fmt.Fprintf(stdout, "cache %s: against the uncached videos PSNR %.2f dB  SSIM %.4f (worst clip %.2f dB, %.4f)\n",
			cr.Rule, r.PSNRAfterFirst, r.SSIMAfterFirst, r.MinPSNRAfterFirst, r.MinSSIMAfterFirst)
		fmt.Fprintf(stdout, "  denoiser calls computed %d of %d (%.0f%% saved); denoising %.1fs, uncached %.1fs (%.2fx)\n",
			cr.ComputedCalls, cr.Calls, 100*cr.SavedCalls, cr.DiffusionS, cr.ReferenceDiffusion, cr.Speedup)
		fmt.Fprintln(stdout, pipeline.CacheOutcome{Samples: cached.Caches, Steps: o.Steps, DenoiseMS: 1000 * cr.DiffusionS,
			UncachedMS: 1000 * cr.ReferenceDiffusion, PSNR: r.PSNRAfterFirst, SSIM: r.SSIMAfterFirst}.Line())
	}
	if err := m.writeSheet(c.Sheet); err != nil {
		return rep, err
	}
	if c.JSON != "" {
		return rep, rep.WriteJSON(c.JSON)
	}
	return rep, nil
}

// runTextCache is `vdpp eval --cache` on a text-to-video model, which has no clips to
// score against: --num-samples videos of Prompts at the model's sizes and --steps steps,
// each generated with the cache and without it (CompareCache); it prints each video's
// scores against its uncached twin and the cache's one line, and writes the comparison as
// JSON to --json.
func (c Command) runTextCache(ctx context.Context, r family.Resolved, rule pipeline.Cache, stdout, progress io.Writer) error {
	s, err := r.Open(family.Options{Backend: c.Backend, Roles: family.AllRoles, Prompts: true})
	if err != nil {
		return err
	}
	defer s.Close()
	pr := s.DefaultParams()
	pr.Seed, pr.Steps = c.Seed, c.Steps
	if rule, err = r.ResolveCache(rule, pr.Steps); err != nil {
		return badOptions("%w", err)
	}
	pr.Cache = rule
	if err := s.Validate(pr); err != nil {
		return badParams(err)
	}
	inputs := make([]family.Input, c.Samples)
	for i := range inputs {
		inputs[i] = family.Input{Prompt: &family.Prompt{Text: Prompts[i%len(Prompts)]}}
	}
	start := time.Now()
	cmp, err := CompareCache(ctx, s, inputs, pr, func(i int) {
		fmt.Fprintf(progress, "eval: video %d/%d (%.0fs)\n", i+1, c.Samples, time.Since(start).Seconds())
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d videos of %d frames at %dx%d, %d steps, each with and without the cache\n", c.Model, c.Samples, pr.NumFrames, pr.Width, pr.Height, pr.Steps)
	for _, cl := range cmp.Clips {
		fmt.Fprintf(stdout, "  video %d  PSNR %6.2f dB  SSIM %.4f  %q\n", cl.Index, cl.PSNR, cl.SSIM, cl.Prompt)
	}
	fmt.Fprintf(stdout, "cache %s: against the uncached videos PSNR %.2f dB  SSIM %.4f (worst video %.2f dB, %.4f)\n", cmp.Rule, cmp.PSNR, cmp.SSIM, cmp.WorstPSNR, cmp.WorstSSIM)
	fmt.Fprintln(stdout, cmp.Line)
	if c.JSON == "" {
		return nil
	}
	b, err := json.MarshalIndent(cmp, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(c.JSON, append(b, '\n'), atomicfile.Options{})
}
