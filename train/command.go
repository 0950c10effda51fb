package train

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model/nn"
)

// errCommand marks the command's refusals: ErrOptions, and a command-line mistake
// (cli.ErrUsage).
var errCommand = fmt.Errorf("%w: %w", ErrOptions, cli.ErrUsage)

// badCommand is an error about the command's options, errCommand, whose message is
// fmt.Errorf's.
func badCommand(format string, a ...any) error { return cli.Errorf(errCommand, format, a...) }

// Command is `vdpp train`'s flags: the run's Options and what the command does around the
// run (data-parallel processes, the benchmark, the report, the export).
type Command struct {
	Options
	// NProc is the local processes training data-parallel (1: this one); OwnSessions starts
	// each in a session of its own.
	NProc       int
	OwnSessions bool
	// Timeout is the longest wait for another process in one step; HeartbeatTimeout how
	// long a silent process may stay silent before the run ends, naming it.
	Timeout          time.Duration
	HeartbeatTimeout time.Duration
	// Bench runs the training benchmark (bench.Train) for Rounds rounds.
	Bench  bool
	Rounds int
	// JSON is where rank 0 writes the run's Report (the benchmark's report with Bench).
	JSON string
	// ConfigsFile is a JSON file of component configs (ReadConfigs) for Options.Configs.
	ConfigsFile string
	Backend     string
	// Export is the diffusers folder written after training (ExportRaw: the weights, not
	// their moving averages); ExportOnly writes it from Dir's checkpoints and trains nothing.
	Export     string
	ExportRaw  bool
	ExportOnly bool
}

// DefaultCommand are `vdpp train`'s defaults: DefaultOptions in out/train, one process.
func DefaultCommand() Command {
	o := DefaultOptions()
	o.Dir = "out/train"
	return Command{Options: o, NProc: 1, Timeout: 30 * time.Minute, HeartbeatTimeout: comm.DefaultHeartbeatTimeout, Rounds: 3}
}

// RegisterFlags binds the command's options to fs, with c's current values as defaults.
func (c *Command) RegisterFlags(fs *cli.FlagSet) {
	o := &c.Options
	fs.StringVar(&o.Dir, "dir", o.Dir, "run folder (checkpoints, loss.jsonl)")
	fs.StringVar(&o.Phase, "phase", o.Phase, "vae or unet (the UNet phase needs DIR's VAE checkpoint), or finetune (set by --model)")
	fs.StringVar(&o.Model, "model", o.Model, "fine-tune the denoiser of this model folder (a family that can: Wan) on the procedural clips, with the flow-matching loss")
	fs.IntVar(&o.Expert, "expert", o.Expert, "with --model: the expert to fine-tune, 1 (transformer) or 2 (transformer_2); 0 = the low-noise expert where there are two")
	fs.IntVar(&o.HeldOut, "held-out", o.HeldOut, "with --model: held-out clips whose loss is measured before training, every --eval-every steps and at the end")
	fs.IntVar(&o.EvalEvery, "eval-every", o.EvalEvery, "with --held-out: steps between held-out losses (0 = start and end only)")
	fs.IntVar(&o.Steps, "steps", o.Steps, "train until this step")
	fs.IntVar(&o.Batch, "batch", o.Batch, "clips per step (the global batch, over every process)")
	fs.IntVar(&o.MicroBatch, "micro-batch", o.MicroBatch, "clips per gradient computation; each process accumulates batch/micro-batch/nproc of them (results depend on --batch and --micro-batch, never on --nproc)")
	fs.IntVar(&c.NProc, "nproc", c.NProc, "local processes, training data-parallel (each gets GOMAXPROCS = cores/nproc unless GOMAXPROCS is set)")
	fs.BoolVar(&c.OwnSessions, "own-sessions", c.OwnSessions, "with --nproc: start every process in a session of its own (under Linux's autogroup scheduling each then gets its own share of a busy machine's CPUs, not one share for all)")
	fs.IntVar(&o.CheckEvery, "check-every", o.CheckEvery, "compare the processes' weights, EMA and optimizer state every N steps (and at every checkpoint); 0 = at checkpoints only")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "data parallel: longest wait for another process in one step (a dead or stopped one is caught by --heartbeat-timeout first)")
	fs.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", c.HeartbeatTimeout, "data parallel: a process silent this long (no heartbeat: stopped, hung, cut off) ends the run, naming it")
	fs.BoolVar(&c.Bench, "bench", c.Bench, "benchmark: the same training as --nproc N (default 2) processes of one core each, one process of one core and one of N cores, interleaved; every run starts from --dir's checkpoint")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "with --bench: rounds of the three configurations")
	fs.StringVar(&c.JSON, "json", c.JSON, "write the run's report as JSON to this file (rank 0): steps/s, clips/s, per-rank compute / all-reduce / wait / CPU times (with --bench: the benchmark's)")
	fs.StringVar(&c.ConfigsFile, "configs", c.ConfigsFile, "JSON file of component configs (UNet, VAE, CLIP, ... as train.Configs) to train instead of the built-in model's")
	fs.Float64Var(&o.LR, "lr", o.LR, "Adam learning rate")
	fs.Float64Var(&o.LRFinal, "lr-final", o.LRFinal, "decay the learning rate along a half cosine to this value at --steps (0 = constant --lr)")
	fs.IntVar(&o.LRDecayStart, "lr-decay-start", o.LRDecayStart, "with --lr-final: the step the decay starts from")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the weights, batches and noise")
	fs.Uint64Var(&o.Data, "data-seed", o.Data, "dataset seed")
	fs.Var(&o.Rule, "rule", procedural.RuleUsage)
	fs.IntVar(&o.Train, "train-clips", o.Train, "distinct training clips")
	fs.IntVar(&o.VAEFrames, "vae-frames", o.VAEFrames, "VAE phase: clip length (0 = 14)")
	fs.IntVar(&o.VAECrop, "vae-crop", o.VAECrop, "VAE phase: train on random square crops of this size (0 = whole frames)")
	fs.StringVar(&o.InitFrom, "init-from", o.InitFrom, "start from the weights of a diffusers folder (or builtin) instead of random ones")
	fs.BoolVar(&o.DecoderOnly, "decoder-only", o.DecoderOnly, "VAE phase: freeze the encoder, train the decoder")
	fs.BoolVar(&o.Resume, "resume", o.Resume, "continue from DIR's checkpoint of the phase")
	fs.IntVar(&o.EncodeWorkers, "encode-workers", o.EncodeWorkers, "UNet phase: encode all --train-clips up front with this many concurrent encoders (0 = each clip when a step first draws it)")
	fs.IntVar(&o.CheckpointEvery, "checkpoint-every", o.CheckpointEvery, "checkpoint every N steps")
	fs.DurationVar(&o.MaxDuration, "max-duration", o.MaxDuration, "stop (with a checkpoint) after this long; 0 = no limit")
	fs.Float64Var(&o.EMA, "ema", o.EMA, "keep a moving average of the weights with this decay per step, exported instead of them (0 = as the resumed checkpoint; < 0 = off)")
	fs.Float64Var(&o.PMean, "p-mean", o.PMean, "ln sigma mean (UNet phase)")
	fs.Float64Var(&o.PStd, "p-std", o.PStd, "ln sigma std (UNet phase)")
	fs.Float64Var(&o.CondDropout, "cond-dropout", o.CondDropout, "conditioning dropout probability (UNet phase)")
	fs.StringVar(&c.Backend, "backend", c.Backend, "GoMLX backend: go, xla:cuda, xla:/path/plugin.so (default: automatic)")
	fs.StringVar(&c.Export, "export", c.Export, "after training, write the diffusers folder to this path")
	fs.BoolVar(&c.ExportRaw, "export-raw", c.ExportRaw, "export the trained weights, not their moving averages (--ema)")
	fs.BoolVar(&c.ExportOnly, "export-only", c.ExportOnly, "only write the diffusers folder of DIR's checkpoints to --export")
}

// Args renders the command's options as flags, generated from the flag set (parsing them
// gives c back, but for the fields RegisterFlags does not bind: Progress, Configs, ...).
func (c Command) Args() []string {
	fs := cli.New("train", nil, nil)
	c.RegisterFlags(fs)
	return fs.AsArgs()
}

// Resolve checks the parsed command (phaseGiven: --phase was on the command line) and
// fills what the flags imply: --model is the fine-tuning phase. With Bench or ExportOnly
// only what those need is checked; otherwise --init-from builtin becomes the built-in
// model's folder, --configs is read, and the run's Options are validated. Every error is a
// command-line mistake (ErrOptions, cli.ErrUsage).
func (c Command) Resolve(phaseGiven bool) (Command, error) {
	if c.Model != "" {
		if phaseGiven && c.Phase != PhaseFineTune {
			return c, badCommand("--model fine-tunes a model folder; --phase %s trains the built-in model", c.Phase)
		}
		c.Phase = PhaseFineTune
	}
	switch {
	case c.Bench:
		return c, nil
	case c.ExportOnly && c.Export == "":
		return c, badCommand("--export-only needs --export OUT")
	case c.ExportOnly:
		return c, nil
	}
	if c.InitFrom != "" {
		dir, err := builtin.Resolve(c.InitFrom)
		if err != nil {
			return c, badCommand("%w", err)
		}
		c.InitFrom = dir
	}
	if c.ConfigsFile != "" {
		cfg, err := ReadConfigs(c.ConfigsFile)
		if err != nil {
			return c, badCommand("--configs: %w", err)
		}
		c.Configs = &cfg
	}
	if c.NProc < 1 {
		return c, badCommand("--nproc %d < 1", c.NProc)
	}
	if err := c.Validate(); err != nil {
		return c, badCommand("%w", err)
	}
	return c, nil
}

// ReadConfigs reads a Configs JSON file (the keys UNet, VAE, CLIP, Scheduler, Features,
// Index and Sampling; an absent component keeps the built-in model's, TinyConfigs).
func ReadConfigs(path string) (Configs, error) {
	cfg := TinyConfigs()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ExportFolder writes the diffusers folder of the command's run to c.Export: the
// fine-tuned model folder (ExportFineTune, on backend) or the built-in model's (Export).
func (c Command) ExportFolder() error {
	if c.Phase == PhaseFineTune {
		b, err := nn.NewBackend(c.Backend)
		if err != nil {
			return err
		}
		return ExportFineTune(b, c.Options, c.Export, c.ExportRaw)
	}
	return Export(c.Dir, c.Export, ExportOptions{Seed: c.Seed, Raw: c.ExportRaw})
}

// Launch runs `vdpp train ARGS` (exe's; args are the command line after "train") as
// c.NProc local processes (comm.Launch: torchrun's variables, output lines prefixed
// "[rank N] ", the others stopped when one fails), each in a session of its own with
// OwnSessions. Each gets GOMAXPROCS = cores/nproc unless the environment sets GOMAXPROCS.
func (c Command) Launch(ctx context.Context, args []string, out io.Writer) error {
	env := os.Environ()
	if os.Getenv("GOMAXPROCS") == "" {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(max(1, runtime.NumCPU()/c.NProc)))
	}
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: c.NProc, NNodes: 1, Command: append([]string{"train"}, args...),
		Env: env, Stdout: out, Stderr: out, OwnSessions: c.OwnSessions})
}

// RunLaunched joins the launched world described by env and trains as its rank env.Rank
// on backend b. comm's heartbeats end every rank's collectives within HeartbeatTimeout
// when a rank dies, stops or is cut off, naming it; a failing rank ends the job for the
// others at once.
func (c Command) RunLaunched(ctx context.Context, b backends.Backend, env comm.Env) (Result, error) {
	tr, err := comm.Dial(ctx, env, comm.Options{RecvTimeout: c.Timeout, HeartbeatTimeout: c.HeartbeatTimeout})
	if err != nil {
		return Result{}, err
	}
	ranks := make([]int, env.WorldSize)
	for i := range ranks {
		ranks[i] = i
	}
	g, err := comm.NewNamedGroup(tr, "train", ranks)
	if err != nil {
		comm.CloseWith(tr, err)
		return Result{}, err
	}
	peers := GroupPeers(tr, g)
	res, err := RunRank(ctx, b, c.Options, peers)
	if err == nil {
		// Every rank is past its last collective before any closes its links.
		err = peers.Barrier(context.WithoutCancel(ctx))
	}
	comm.CloseWith(tr, err)
	return res, err
}
