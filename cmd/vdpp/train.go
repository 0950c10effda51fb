package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/train"
)

// runTrain is `vdpp train --dir DIR --phase vae|unet --steps N [--resume] [--export OUT]`:
// train the built-in model's VAE or UNet on the procedural dataset, checkpointing into DIR;
// with --export, write the diffusers folder of DIR's latest checkpoints to OUT afterwards.
func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := train.DefaultOptions()
	fs := newFlags("train", stdout, stderr)
	fs.StringVar(&o.Dir, "dir", "out/train", "run folder (checkpoints, loss.jsonl)")
	fs.StringVar(&o.Phase, "phase", o.Phase, "vae or unet (the UNet phase needs DIR's VAE checkpoint)")
	fs.IntVar(&o.Steps, "steps", o.Steps, "train until this step")
	fs.IntVar(&o.Batch, "batch", o.Batch, "clips per step")
	fs.Float64Var(&o.LR, "lr", o.LR, "Adam learning rate")
	fs.Float64Var(&o.LRFinal, "lr-final", 0, "decay the learning rate along a half cosine to this value at --steps (0 = constant --lr)")
	fs.IntVar(&o.LRDecayStart, "lr-decay-start", 0, "with --lr-final: the step the decay starts from")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the weights, batches and noise")
	fs.Uint64Var(&o.Data, "data-seed", o.Data, "dataset seed")
	ruleFlag(fs.FlagSet, &o.Rule)
	fs.IntVar(&o.Train, "train-clips", o.Train, "distinct training clips")
	fs.IntVar(&o.VAEFrames, "vae-frames", 0, "VAE phase: clip length (0 = 14)")
	fs.IntVar(&o.VAECrop, "vae-crop", 0, "VAE phase: train on random square crops of this size (0 = whole frames)")
	fs.StringVar(&o.InitFrom, "init-from", "", "start from the weights of a diffusers folder (or builtin) instead of random ones")
	fs.BoolVar(&o.DecoderOnly, "decoder-only", false, "VAE phase: freeze the encoder, train the decoder")
	fs.BoolVar(&o.Resume, "resume", false, "continue from DIR's checkpoint of the phase")
	fs.IntVar(&o.EncodeWorkers, "encode-workers", 0, "UNet phase: encode all --train-clips up front with this many concurrent encoders (0 = each clip when a step first draws it)")
	fs.IntVar(&o.CheckpointEvery, "checkpoint-every", o.CheckpointEvery, "checkpoint every N steps")
	fs.DurationVar(&o.MaxDuration, "max-duration", 0, "stop (with a checkpoint) after this long; 0 = no limit")
	fs.Float64Var(&o.EMA, "ema", 0, "keep a moving average of the weights with this decay per step, exported instead of them (0 = as the resumed checkpoint; < 0 = off)")
	fs.Float64Var(&o.PMean, "p-mean", o.PMean, "ln sigma mean (UNet phase)")
	fs.Float64Var(&o.PStd, "p-std", o.PStd, "ln sigma std (UNet phase)")
	fs.Float64Var(&o.CondDropout, "cond-dropout", o.CondDropout, "conditioning dropout probability (UNet phase)")
	backend := fs.String("backend", "", "GoMLX backend: go, xla:cuda, xla:/path/plugin.so (default: automatic)")
	export := fs.String("export", "", "after training, write the diffusers folder to this path")
	exportRaw := fs.Bool("export-raw", false, "export the trained weights, not their moving averages (--ema)")
	exportOnly := fs.Bool("export-only", false, "only write the diffusers folder of DIR's checkpoints to --export")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *exportOnly {
		if *export == "" {
			return fmt.Errorf("%w: --export-only needs --export OUT", errUsage)
		}
		if err := train.Export(o.Dir, *export, train.ExportOptions{Seed: o.Seed, Raw: *exportRaw}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "exported %s\n", *export)
		return nil
	}
	if o.InitFrom != "" {
		var err error
		if o.InitFrom, err = builtin.Resolve(o.InitFrom); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	b, err := nn.NewBackend(*backend)
	if err != nil {
		return err
	}
	o.Progress = stderr
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			o.Terminal = true
		}
	}
	res, err := train.Run(ctx, b, o)
	if err != nil {
		return err
	}
	if res.Step == res.FromStep {
		// No step ran, so there is no loss to report (e.g. --steps 0 to seed a run folder).
		fmt.Fprintf(stdout, "%s at step %d, nothing to train; checkpoint %s\n", res.Phase, res.Step, train.StatePath(o.Dir, o.Phase))
	} else {
		fmt.Fprintf(stdout, "trained %s steps %d -> %d in %s (loss %.5f -> %.5f); checkpoint %s\n",
			res.Phase, res.FromStep, res.Step, res.Wall.Round(time.Second), res.FirstLoss, res.LastLoss, train.StatePath(o.Dir, o.Phase))
	}
	if *export != "" {
		if err := train.Export(o.Dir, *export, train.ExportOptions{Seed: o.Seed, Raw: *exportRaw}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "exported %s\n", *export)
	}
	return nil
}
