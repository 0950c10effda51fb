package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/eval"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/train"
)

// runEval is `vdpp eval --model DIR|builtin --json FILE`: generate the held-out clips of the
// procedural dataset from their first frames and score them (PSNR, SSIM per frame) next to
// the repeat-the-first-frame and untrained-UNet baselines (--split train scores training
// clips instead). With --cache the model runs with that step cache and every clip is also
// generated without it: the report adds the scores against the uncached videos, the
// denoiser calls computed and both denoising times. A text-to-video model (no clips to
// score against) takes --cache only: eval.Prompts, each generated cached and uncached.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := eval.DefaultOptions()
	fs := newFlags("eval", stdout, stderr)
	modelFlag := fs.String("model", builtin.Name, "the model `NAME|DIR`: builtin, a diffusers folder; a text-to-video one (builtin-wan, a Wan folder) with --cache only")
	jsonOut := fs.String("json", "", "write the report as JSON to this file")
	backend := fs.String("backend", "", "GoMLX backend (default: automatic)")
	fs.IntVar(&o.Samples, "num-samples", o.Samples, "clips to evaluate")
	fs.Alias("samples", "num-samples")
	split := fs.String("split", "heldout", "dataset split to score: heldout, or train (the first clips the model was trained on: the gap between the two measures memorisation)")
	fs.IntVar(&o.Steps, "steps", o.Steps, "denoising steps")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "generation seed")
	fs.Uint64Var(&o.DataSeed, "data-seed", o.DataSeed, "dataset seed")
	ruleFlag(fs.FlagSet, &o.Rule)
	fs.BoolVar(&o.Untrained, "untrained", o.Untrained, "also evaluate the untrained-UNet baseline")
	fs.Float64Var(&o.MinGuidance, "min-guidance", -1, "first-frame guidance (-1: the model's vdpp_sampling.json: 2 for builtin; 1, as SVD, for a folder without one)")
	fs.Float64Var(&o.MaxGuidance, "max-guidance", -1, "last-frame guidance (-1: the model's vdpp_sampling.json: 4 for builtin; 3, as SVD, for a folder without one)")
	initSeed := fs.Uint64("init-seed", 1, "seed of the untrained UNet's initial weights")
	sheet := fs.String("sheet", "", "write a contact sheet PNG (rows: true clip, generated clip, VAE round trip with --recon) of the first clips")
	gifDir := fs.String("gif-dir", "", "write side-by-side GIFs (true | generated) of the first clips here")
	media := fs.Int("media-clips", 4, "clips shown in --sheet and --gif-dir")
	chunk := fs.Int("decode-chunk-size", -1, "frames the VAE decodes together (0: all; -1: the model's vdpp_sampling.json: 7 for builtin; all for a folder without one)")
	recon := fs.Bool("recon", true, "also score the VAE round trip (an upper bound for the model)")
	cache := cacheflag.Default()
	cache.Register(fs.FlagSet)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rule, err := cache.Rule()
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	sp, err := procedural.ParseSplit(*split)
	if err != nil {
		return fmt.Errorf("%w: --split: %w", errUsage, err)
	}
	o.TrainSplit = sp == procedural.Train
	resolved, err := family.Resolve(*modelFlag)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if rule, err = resolved.ResolveCache(rule, o.Steps); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if resolved.Dir == "" {
		return fmt.Errorf("%w: --model %s has no image encoder or VAE: give a model folder or %q", errUsage, *modelFlag, builtin.Name)
	}
	if desc, err := resolved.Describe(); err != nil {
		return err
	} else if desc.TextDim > 0 {
		if !rule.On() {
			return fmt.Errorf("%w: --model %s is a text-to-video model, which has no clips to score against: eval measures its step cache (--cache MODE) against the same videos uncached", errUsage, *modelFlag)
		}
		stepsGiven := false
		fs.Visit(func(f *flag.Flag) { stepsGiven = stepsGiven || f.Name == "steps" })
		return evalTextCache(ctx, resolved, *modelFlag, *backend, rule, o, stepsGiven, *jsonOut, stdout, stderr)
	}
	s, err := resolved.Open(family.Options{Backend: *backend, Roles: family.AllRoles})
	if err != nil {
		return err
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
	if *chunk >= 0 {
		pr.DecodeChunkSize = *chunk
	}
	if pr.MinGuidance > pr.MaxGuidance {
		return fmt.Errorf("%w: --min-guidance %v > --max-guidance %v", errUsage, pr.MinGuidance, pr.MaxGuidance)
	}
	o.MinGuidance, o.MaxGuidance = pr.MinGuidance, pr.MaxGuidance
	var untrained eval.Generator
	if o.Untrained {
		ri, ok := s.(family.Reinitializer)
		if !ok {
			return fmt.Errorf("%w: --untrained: the %s family cannot reinitialise its denoiser (--untrained=false)", errUsage, s.Family())
		}
		u, err := ri.WithDenoiserWeights(train.DenoiserInit(*initSeed))
		if err != nil {
			return err
		}
		defer u.Close()
		untrained = eval.PipelineGenerator(u, pr)
	}
	// With a step cache the model runs cached, and every clip also uncached right after it
	// (the reference its video is scored against; the two denoising times interleave).
	gen := eval.PipelineGenerator(s, pr)
	var cached, uncached eval.Stats
	if rule.On() {
		cpr := pr
		cpr.Cache = rule
		if err := s.Validate(cpr); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		gen = eval.CountingGenerator(s, cpr, &cached)
		o.Reference = eval.CountingGenerator(s, pr, &uncached)
	}
	m := &evalMedia{max: *media, gifDir: *gifDir}
	o.Keep = m.keep
	if *recon {
		// decoded in the chunks generation uses
		if o.Reconstruct, err = eval.Reconstructor(ctx, s, pr); err != nil {
			return fmt.Errorf("%w: --recon: %w (--recon=false)", errUsage, err)
		}
		o.KeepReconstruction = m.keepReconstruction
	}
	start := time.Now()
	rep, err := eval.Run(ctx, o, gen, untrained, func(i int) {
		fmt.Fprintf(stderr, "eval: clip %d/%d (%.0fs)\n", i+1, o.Samples, time.Since(start).Seconds())
	})
	if err != nil {
		return err
	}
	rep.Model, rep.DecodeChunk, rep.WallS = *modelFlag, pr.DecodeChunkSize, time.Since(start).Seconds()
	fmt.Fprintf(stdout, "%s clips %d, %d steps: mean over frames 2..%d\n", rep.Split, o.Samples, o.Steps, rep.Frames)
	fmt.Fprintf(stdout, "  model            PSNR %6.2f dB  SSIM %.4f\n", rep.PSNRAfterFirst, rep.SSIMAfterFirst)
	fmt.Fprintf(stdout, "  repeat frame 1   PSNR %6.2f dB  SSIM %.4f\n", rep.RepeatPSNRAfterFirst, rep.RepeatSSIMAfterFirst)
	if o.Untrained {
		fmt.Fprintf(stdout, "  untrained UNet   PSNR %6.2f dB  SSIM %.4f\n", rep.UntrainedPSNR, rep.UntrainedSSIM)
	}
	if *recon {
		fmt.Fprintf(stdout, "  VAE round trip   PSNR %6.2f dB  SSIM %.4f (all frames)\n", rep.VAEReconPSNR, rep.VAEReconSSIM)
	}
	if rule.On() {
		rep.Cache = eval.NewCacheReport(rule.String(), cached, uncached)
		r, c := rep.Reference, rep.Cache
		fmt.Fprintf(stdout, "  uncached model   PSNR %6.2f dB  SSIM %.4f\n", r.TruthPSNRAfterFirst, r.TruthSSIMAfterFirst)
		fmt.Fprintf(stdout, "cache %s: against the uncached videos PSNR %.2f dB  SSIM %.4f (worst clip %.2f dB, %.4f)\n",
			c.Rule, r.PSNRAfterFirst, r.SSIMAfterFirst, r.MinPSNRAfterFirst, r.MinSSIMAfterFirst)
		fmt.Fprintf(stdout, "  denoiser calls computed %d of %d (%.0f%% saved); denoising %.1fs, uncached %.1fs (%.2fx)\n",
			c.ComputedCalls, c.Calls, 100*c.SavedCalls, c.DiffusionS, c.ReferenceDiffusion, c.Speedup)
		fmt.Fprintln(stdout, pipeline.CacheOutcome{Samples: cached.Caches, Steps: o.Steps, DenoiseMS: 1000 * c.DiffusionS,
			UncachedMS: 1000 * c.ReferenceDiffusion, PSNR: r.PSNRAfterFirst, SSIM: r.SSIMAfterFirst}.Line())
	}
	if err := m.writeSheet(*sheet); err != nil {
		return err
	}
	if *jsonOut != "" {
		return rep.WriteJSON(*jsonOut)
	}
	return nil
}

// evalTextCache is `vdpp eval --cache` on a text-to-video model: o.Samples videos of
// eval.Prompts at the model's defaults (--steps when given), each generated with the cache
// and without it; it prints each video's scores against its uncached twin and the cache's
// one line, and writes the comparison as JSON to jsonOut when set.
func evalTextCache(ctx context.Context, r family.Resolved, name, backend string, rule pipeline.Cache, o eval.Options, stepsGiven bool, jsonOut string, stdout, stderr io.Writer) error {
	s, err := r.Open(family.Options{Backend: backend, Roles: family.AllRoles, Prompts: true})
	if err != nil {
		return err
	}
	defer s.Close()
	pr := s.DefaultParams()
	pr.Seed = o.Seed
	if stepsGiven {
		pr.Steps = o.Steps
	}
	if rule, err = r.ResolveCache(rule, pr.Steps); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	pr.Cache = rule
	if err := s.Validate(pr); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	inputs := make([]family.Input, o.Samples)
	for i := range inputs {
		inputs[i] = family.Input{Prompt: &family.Prompt{Text: eval.Prompts[i%len(eval.Prompts)]}}
	}
	start := time.Now()
	c, err := eval.CompareCache(ctx, s, inputs, pr, func(i int) {
		fmt.Fprintf(stderr, "eval: video %d/%d (%.0fs)\n", i+1, o.Samples, time.Since(start).Seconds())
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d videos of %d frames at %dx%d, %d steps, each with and without the cache\n", name, o.Samples, pr.NumFrames, pr.Width, pr.Height, pr.Steps)
	for _, cl := range c.Clips {
		fmt.Fprintf(stdout, "  video %d  PSNR %6.2f dB  SSIM %.4f  %q\n", cl.Index, cl.PSNR, cl.SSIM, cl.Prompt)
	}
	fmt.Fprintf(stdout, "cache %s: against the uncached videos PSNR %.2f dB  SSIM %.4f (worst video %.2f dB, %.4f)\n", c.Rule, c.PSNR, c.SSIM, c.WorstPSNR, c.WorstSSIM)
	fmt.Fprintln(stdout, c.Line)
	if jsonOut != "" {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(jsonOut, append(b, '\n'), atomicfile.Options{})
	}
	return nil
}
