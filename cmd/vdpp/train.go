package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/train"
)

// runTrain is `vdpp train --dir DIR --phase vae|unet --steps N [--resume] [--export OUT]`:
// train the built-in model's VAE or UNet on the procedural dataset, checkpointing into DIR;
// with --export, write the diffusers folder of DIR's latest checkpoints to OUT afterwards.
// With --nproc N it starts N processes of itself that train data-parallel; a process
// started by `vdpp launch`, torchrun or LeaderWorkerSet (their variables set, world > 1) is
// one rank of such a run.
func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := train.DefaultOptions()
	fs := newFlags("train", stdout, stderr)
	fs.StringVar(&o.Dir, "dir", "out/train", "run folder (checkpoints, loss.jsonl)")
	fs.StringVar(&o.Phase, "phase", o.Phase, "vae or unet (the UNet phase needs DIR's VAE checkpoint), or finetune (set by --model)")
	fs.StringVar(&o.Model, "model", "", "fine-tune the denoiser of this model folder (a family that can: Wan) on the procedural clips, with the flow-matching loss")
	fs.IntVar(&o.Expert, "expert", 0, "with --model: the expert to fine-tune, 1 (transformer) or 2 (transformer_2); 0 = the low-noise expert where there are two")
	fs.IntVar(&o.HeldOut, "held-out", 0, "with --model: held-out clips whose loss is measured before training, every --eval-every steps and at the end")
	fs.IntVar(&o.EvalEvery, "eval-every", 0, "with --held-out: steps between held-out losses (0 = start and end only)")
	fs.IntVar(&o.Steps, "steps", o.Steps, "train until this step")
	fs.IntVar(&o.Batch, "batch", o.Batch, "clips per step (the global batch, over every process)")
	fs.IntVar(&o.MicroBatch, "micro-batch", 1, "clips per gradient computation; each process accumulates batch/micro-batch/nproc of them (results depend on --batch and --micro-batch, never on --nproc)")
	nproc := fs.Int("nproc", 1, "local processes, training data-parallel (each gets GOMAXPROCS = cores/nproc unless GOMAXPROCS is set)")
	ownSessions := fs.Bool("own-sessions", false, "with --nproc: start every process in a session of its own (under Linux's autogroup scheduling each then gets its own share of a busy machine's CPUs, not one share for all)")
	fs.IntVar(&o.CheckEvery, "check-every", o.CheckEvery, "compare the processes' weights, EMA and optimizer state every N steps (and at every checkpoint); 0 = at checkpoints only")
	timeout := fs.Duration("timeout", 30*time.Minute, "data parallel: longest wait for another process in one step (a dead or stopped one is caught by --heartbeat-timeout first)")
	heartbeat := fs.Duration("heartbeat-timeout", comm.DefaultHeartbeatTimeout, "data parallel: a process silent this long (no heartbeat: stopped, hung, cut off) ends the run, naming it")
	bench := fs.Bool("bench", false, "benchmark: the same training as --nproc N (default 2) processes of one core each, one process of one core and one of N cores, interleaved; every run starts from --dir's checkpoint")
	rounds := fs.Int("rounds", 3, "with --bench: rounds of the three configurations")
	jsonOut := fs.String("json", "", "write the run's report as JSON to this file (rank 0): steps/s, clips/s, per-rank compute / all-reduce / wait / CPU times (with --bench: the benchmark's)")
	configsFile := fs.String("configs", "", "JSON file of component configs (UNet, VAE, CLIP, ... as train.Configs) to train instead of the built-in model's")
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
	exportOut := fs.String("export", "", "after training, write the diffusers folder to this path")
	exportRaw := fs.Bool("export-raw", false, "export the trained weights, not their moving averages (--ema)")
	exportOnly := fs.Bool("export-only", false, "only write the diffusers folder of DIR's checkpoints to --export")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.Model != "" {
		if fs.Given("phase") && o.Phase != train.PhaseFineTune {
			return fmt.Errorf("%w: --model fine-tunes a model folder; --phase %s trains the built-in model", errUsage, o.Phase)
		}
		o.Phase = train.PhaseFineTune
	}
	export := func() error {
		if o.Phase == train.PhaseFineTune {
			b, err := nn.NewBackend(*backend)
			if err != nil {
				return err
			}
			return train.ExportFineTune(b, o, *exportOut, *exportRaw)
		}
		return train.Export(o.Dir, *exportOut, train.ExportOptions{Seed: o.Seed, Raw: *exportRaw})
	}
	if *bench {
		n := *nproc
		if !fs.Given("nproc") {
			n = 2
		}
		return runTrainBench(ctx, fs.FlagSet, args, o.Dir, n, *rounds, *jsonOut, stdout, stderr)
	}
	if *exportOnly {
		if *exportOut == "" {
			return fmt.Errorf("%w: --export-only needs --export OUT", errUsage)
		}
		if err := export(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "exported %s\n", *exportOut)
		return nil
	}
	if o.InitFrom != "" {
		var err error
		if o.InitFrom, err = builtin.Resolve(o.InitFrom); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	if *configsFile != "" {
		cfg, err := readConfigs(*configsFile)
		if err != nil {
			return fmt.Errorf("%w: --configs: %w", errUsage, err)
		}
		o.Configs = &cfg
	}
	if *nproc < 1 {
		return fmt.Errorf("%w: --nproc %d < 1", errUsage, *nproc)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	env, err := comm.EnvFromOS(os.Getenv)
	if err != nil {
		return err
	}
	if env.WorldSize == 1 && *nproc > 1 {
		return launchTrain(ctx, *nproc, *ownSessions, args, stderr)
	}
	if env.WorldSize > 1 && *nproc > 1 && *nproc != env.LocalWorldSize {
		return fmt.Errorf("%w: --nproc %d, but the launcher started %d processes on this node", errUsage, *nproc, env.LocalWorldSize)
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
	var res train.Result
	if env.WorldSize > 1 {
		res, err = trainRank(ctx, b, o, env, *timeout, *heartbeat)
	} else {
		res, err = train.Run(ctx, b, o)
	}
	if err != nil {
		return err
	}
	if env.Rank != 0 {
		return nil
	}
	if *jsonOut != "" {
		if err := writeJSONFile(*jsonOut, newTrainReport(res, o, runtime.GOMAXPROCS(0))); err != nil {
			return err
		}
	}
	if res.Step == res.FromStep {
		// No step ran, so there is no loss to report (e.g. --steps 0 to seed a run folder).
		fmt.Fprintf(stdout, "%s at step %d, nothing to train; checkpoint %s\n", res.Phase, res.Step, train.StatePath(o.Dir, o.Phase))
	} else {
		fmt.Fprintf(stdout, "trained %s steps %d -> %d in %s (loss %.5f -> %.5f); checkpoint %s\n",
			res.Phase, res.FromStep, res.Step, res.Wall.Round(time.Second), res.FirstLoss, res.LastLoss, train.StatePath(o.Dir, o.Phase))
		if !math.IsNaN(res.FirstHeldOut) {
			fmt.Fprintf(stdout, "held-out loss %.5f -> %.5f (%d clips)\n", res.FirstHeldOut, res.LastHeldOut, o.HeldOut)
		}
		printRankTimes(stdout, res, o.Batch)
	}
	if *exportOut != "" {
		if err := export(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "exported %s\n", *exportOut)
	}
	return nil
}
