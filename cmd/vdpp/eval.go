package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/eval"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/train"
)

// runEval is `vdpp eval --model DIR|builtin --json FILE`: generate the held-out clips of the
// procedural dataset from their first frames and score them (PSNR, SSIM per frame) next to
// the repeat-the-first-frame and untrained-UNet baselines (--split train scores training
// clips instead).
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := eval.DefaultOptions()
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelFlag := fs.String("model", builtin.Name, "diffusers folder, or builtin")
	jsonOut := fs.String("json", "", "write the report as JSON to this file")
	backend := fs.String("backend", "", "GoMLX backend (default: automatic)")
	fs.IntVar(&o.Samples, "samples", o.Samples, "clips to evaluate")
	split := fs.String("split", "heldout", "dataset split to score: heldout, or train (the first clips the model was trained on: the gap between the two measures memorisation)")
	fs.IntVar(&o.Steps, "steps", o.Steps, "denoising steps")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "generation seed")
	fs.Uint64Var(&o.DataSeed, "data-seed", o.DataSeed, "dataset seed")
	ruleFlag(fs, &o.Rule)
	fs.BoolVar(&o.Untrained, "untrained", o.Untrained, "also evaluate the untrained-UNet baseline")
	fs.Float64Var(&o.MinGuidance, "min-guidance", -1, "first-frame guidance (-1: the model's vdpp_sampling.json: 2 for builtin; 1, as SVD, for a folder without one)")
	fs.Float64Var(&o.MaxGuidance, "max-guidance", -1, "last-frame guidance (-1: the model's vdpp_sampling.json: 4 for builtin; 3, as SVD, for a folder without one)")
	initSeed := fs.Uint64("init-seed", 1, "seed of the untrained UNet's initial weights")
	sheet := fs.String("sheet", "", "write a contact sheet PNG (rows: true clip, generated clip, VAE round trip with --recon) of the first clips")
	gifDir := fs.String("gif-dir", "", "write side-by-side GIFs (true | generated) of the first clips here")
	media := fs.Int("media-clips", 4, "clips shown in --sheet and --gif-dir")
	chunk := fs.Int("decode-chunk-size", -1, "frames the VAE decodes together (0: all; -1: the model's vdpp_sampling.json: 7 for builtin; all for a folder without one)")
	recon := fs.Bool("recon", true, "also score the VAE round trip (an upper bound for the model)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sp, err := procedural.ParseSplit(*split)
	if err != nil {
		return fmt.Errorf("%w: --split: %w", errUsage, err)
	}
	o.TrainSplit = sp == procedural.Train
	dir, err := builtin.Resolve(*modelFlag)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	b, err := nn.NewBackend(*backend)
	if err != nil {
		return err
	}
	p, err := svd.Load(dir, "", b, svd.AllParts)
	if err != nil {
		return err
	}
	defer p.Close()
	pr := p.DefaultParams()
	pr.Height, pr.Width, pr.Steps, pr.Seed = 64, 64, o.Steps, o.Seed
	smp, err := builtin.Sampling(*modelFlag)
	if err != nil {
		return err
	}
	pr.MinGuidance, pr.MaxGuidance, pr.DecodeChunkSize = smp.Resolve(o.MinGuidance, o.MaxGuidance, *chunk)
	if pr.MinGuidance > pr.MaxGuidance {
		return fmt.Errorf("%w: --min-guidance %v > --max-guidance %v", errUsage, pr.MinGuidance, pr.MaxGuidance)
	}
	o.MinGuidance, o.MaxGuidance = pr.MinGuidance, pr.MaxGuidance
	var untrained eval.Generator
	if o.Untrained {
		w, err := train.UNetInitWeights(p.UNetConfig, *initSeed)
		if err != nil {
			return err
		}
		um, err := unet.New(p.UNetConfig, w, b)
		if err != nil {
			return err
		}
		defer um.Close()
		q := *p
		q.UNet = um
		untrained = eval.PipelineGenerator(svd.NewSampler(&q, smp), pr)
	}
	m := &evalMedia{max: *media, gifDir: *gifDir}
	o.Keep = m.keep
	if *recon {
		o.Reconstruct = eval.Reconstructor(p, pr.DecodeChunkSize) // the chunking generation uses
		o.KeepReconstruction = m.keepReconstruction
	}
	start := time.Now()
	rep, err := eval.Run(ctx, o, eval.PipelineGenerator(svd.NewSampler(p, smp), pr), untrained, func(i int) {
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
	if err := m.writeSheet(*sheet); err != nil {
		return err
	}
	if *jsonOut != "" {
		return rep.WriteJSON(*jsonOut)
	}
	return nil
}
