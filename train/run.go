package train

import (
	stdcontext "context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/tensor"
)

// Phases of a training run.
const (
	PhaseVAE  = "vae"
	PhaseUNet = "unet"
)

// ErrOptions is returned for invalid options.
var ErrOptions = errors.New("train: bad options")

// Options configure a run; RegisterFlags binds them to `vdpp train`'s flags. A field tagged
// `flag:"-"` is not drawn at random by the flags' round-trip test (internal/cli/clitest):
// it has no flag (the command sets it), or its flag takes a few named values.
type Options struct {
	Dir   string // run folder: checkpoints, loss log
	Phase string // PhaseVAE, PhaseUNet or PhaseFineTune
	Steps int    // train until this step (a resumed run continues up to it)
	Batch int    // clips per step (the global batch, over every rank)
	// MicroBatch is the clips of one gradient computation (0 means 1). A step's Batch/MicroBatch
	// microbatch gradients are summed along a tree fixed by their count (sumTree), so a
	// run's results depend on Batch and MicroBatch but not on how many ranks share the
	// microbatches, nor on how many each accumulates: with N ranks every rank computes
	// Batch/MicroBatch/N of them (a whole number is required).
	MicroBatch int
	// CheckEvery compares the ranks' state (weights, EMA, optimizer) every this many steps
	// and at every checkpoint; a rank whose state differs from rank 0's ends the run with
	// ErrDiverged. 0 checks at checkpoints only.
	CheckEvery int
	LR         float64
	// LRFinal, when > 0, decays the learning rate from LR to LRFinal along a half cosine
	// between step LRDecayStart and Steps (LRAt): small steps at the end settle the
	// weights that batch-of-one steps keep shaking. 0 keeps LR throughout.
	LRFinal      float64
	LRDecayStart int
	Seed         uint64          // weights init, batch sampling, noise
	Data         uint64          // dataset seed
	Rule         procedural.Rule `flag:"-"` // dataset rule (procedural.ConfigFor); its flag's values are few: not drawn at random
	Train        int             // number of distinct training clips (indices 0..Train-1)
	Resume       bool            // continue from Dir's checkpoint of the phase
	// VAEFrames is the clip length the VAE phase trains on (the first frames of a clip);
	// 0 means the dataset's 14.
	VAEFrames int
	// VAECrop, when > 0, trains the VAE on random crops of this size (the same window in
	// every frame of a clip; a multiple of the downsampling factor): the networks are
	// convolutional, and a 32x32 crop costs a quarter of a 64x64 frame.
	VAECrop int
	// InitFrom, when set and not resuming, starts the phase's network from the weights of a
	// diffusers folder (e.g. the shipped builtin/model) instead of random ones; the
	// optimizer state starts fresh.
	InitFrom string
	// DecoderOnly freezes the VAE encoder (its latent space stays what a UNet trained on
	// it expects) and trains the temporal decoder only.
	DecoderOnly bool
	// EMA, in (0, 1), keeps an exponential moving average of the trained weights with this
	// decay per step, saved in the checkpoint and preferred by Export: with batch-of-one
	// steps the raw weights jitter from step to step, and diffusion models sample better
	// from the average. 0 continues a resumed checkpoint's EMA (none for a new run); a
	// negative value turns it off and drops a checkpoint's averages.
	EMA float64

	// EncodeWorkers, when > 0, makes the UNet phase encode every training clip the latent
	// cache lacks before its first step, with this many concurrent encoders; 0 encodes each
	// clip when a step first draws it. Same values either way.
	EncodeWorkers int

	CheckpointEvery int // steps; 0 = only at the end
	// MaxDuration stops the run (with a checkpoint) once exceeded; 0 = no limit.
	MaxDuration time.Duration

	// Model is the folder PhaseFineTune fine-tunes (any family that implements
	// finetune.Tuner), Expert the denoiser of it (0: the family's choice).
	Model  string
	Expert int
	// HeldOut is how many held-out clips give the held-out loss (phases that have one:
	// PhaseFineTune), measured before the first step, every EvalEvery steps (0: only at
	// the end) and at the end.
	HeldOut, EvalEvery int

	// Configs replaces TinyConfigs (tests use smaller networks); nil means TinyConfigs.
	Configs *Configs `flag:"-"`

	// Diffusion objective.
	PMean, PStd  float64   // ln σ ~ N(PMean, PStd²)
	CondDropout  float64   // probability of zeroing image embedding and image latents
	NoiseAug     float64   `flag:"-"` // noise_aug_strength of the conditioning image
	FPS, Motion  int       `flag:"-"` // added_time_ids: fps (the UNet gets fps-1) and motion bucket
	Progress     io.Writer `flag:"-"`
	Terminal     bool      `flag:"-"` // Progress is a terminal: draw a bar instead of log lines
	ProgressEach int       `flag:"-"` // plain log line every N steps (default 10)
}

// DefaultOptions returns the settings used for the built-in model.
func DefaultOptions() Options {
	return Options{Phase: PhaseVAE, Steps: 1000, Batch: 1, LR: 5e-4, Seed: 1, Data: 1, Rule: procedural.DefaultRule, Train: 4096,
		CheckpointEvery: 50, CheckEvery: 10, PMean: 0.0, PStd: 1.4, CondDropout: 0.1, NoiseAug: 0.02, FPS: 7, Motion: 127,
		ProgressEach: 10}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: no run folder", ErrOptions)
	case o.Phase != PhaseVAE && o.Phase != PhaseUNet && o.Phase != PhaseFineTune:
		return fmt.Errorf("%w: phase %q (want %s, %s or %s)", ErrOptions, o.Phase, PhaseVAE, PhaseUNet, PhaseFineTune)
	case (o.Phase == PhaseFineTune) != (o.Model != ""):
		return fmt.Errorf("%w: the %s phase and only it takes a model folder (--model)", ErrOptions, PhaseFineTune)
	case o.HeldOut < 0 || o.EvalEvery < 0:
		return fmt.Errorf("%w: %d held-out clips every %d steps", ErrOptions, o.HeldOut, o.EvalEvery)
	case o.VAECrop < 0:
		return fmt.Errorf("%w: crop %d", ErrOptions, o.VAECrop)
	case o.Steps < 0 || o.Batch < 1 || o.Train < 1:
		return fmt.Errorf("%w: steps %d, batch %d, train clips %d", ErrOptions, o.Steps, o.Batch, o.Train)
	case o.MicroBatch < 0 || o.Batch%o.microBatch() != 0:
		return fmt.Errorf("%w: --batch %d is not a whole number of microbatches of %d", ErrOptions, o.Batch, o.microBatch())
	case o.CheckEvery < 0:
		return fmt.Errorf("%w: check every %d steps", ErrOptions, o.CheckEvery)
	case !(o.LR > 0) || o.PStd < 0 || o.CondDropout < 0 || o.CondDropout > 1:
		return fmt.Errorf("%w: lr %v, p_std %v, dropout %v", ErrOptions, o.LR, o.PStd, o.CondDropout)
	case o.LRFinal < 0 || math.IsNaN(o.LRFinal) || o.LRDecayStart < 0:
		return fmt.Errorf("%w: final lr %v from step %d", ErrOptions, o.LRFinal, o.LRDecayStart)
	case o.LRFinal > 0 && o.LRDecayStart >= o.Steps:
		return fmt.Errorf("%w: the lr decay starts at step %d, not before --steps %d", ErrOptions, o.LRDecayStart, o.Steps)
	case o.EncodeWorkers < 0:
		return fmt.Errorf("%w: encode workers %d", ErrOptions, o.EncodeWorkers)
	case !(o.EMA < 1):
		return fmt.Errorf("%w: ema decay %v (want < 1)", ErrOptions, o.EMA)
	}
	return nil
}

// StatePath is the checkpoint file of a phase in a run folder.
func StatePath(dir, phase string) string { return filepath.Join(dir, phase+".state.safetensors") }

// LossLogPath is the JSON-lines loss log of a run folder.
func LossLogPath(dir string) string { return filepath.Join(dir, "loss.jsonl") }

// LogLine is one line of the loss log.
type LogLine struct {
	Phase string  `json:"phase"`
	Step  int     `json:"step"`
	Loss  float64 `json:"loss"`
	MSE   float64 `json:"mse,omitempty"`
	LR    float64 `json:"lr,omitempty"` // learning rate of the step
	// HeldOut is the held-out loss after the step, on the steps that measured it.
	HeldOut  float64 `json:"heldout_loss,omitempty"`
	StepS    float64 `json:"step_s"`
	ElapsedS float64 `json:"elapsed_s"`
}

// Result summarises a run.
type Result struct {
	Phase     string
	FromStep  int
	Step      int
	LastLoss  float64
	FirstLoss float64
	Wall      time.Duration
	// Steady is Wall without the first step (which compiles the graphs).
	Steady time.Duration
	// FirstHeldOut and LastHeldOut are the held-out loss before the first step and after
	// the last (NaN when the phase has none or Options.HeldOut is 0).
	FirstHeldOut, LastHeldOut float64
	// Ranks is the number of processes that trained; Times says where each one's time went.
	Ranks int
	Times []RankTimes
}

// StepsPerSecond is the steady step rate: the steps after the first over Steady.
func (r Result) StepsPerSecond() float64 {
	if n := r.Step - r.FromStep - 1; n > 0 && r.Steady > 0 {
		return float64(n) / r.Steady.Seconds()
	}
	return 0
}

// Run trains one phase on backend b in one process: RunRank with a world of one.
func Run(ctx stdcontext.Context, b backends.Backend, o Options) (Result, error) {
	return RunRank(ctx, b, o, nil)
}

// RunRank trains one phase on backend b as one rank of a data-parallel run over peers (nil:
// a world of one). Every rank opens the same state from the run folder (which every rank
// must see), computes its share of each step's microbatches and applies the same summed
// gradient; rank 0 writes the checkpoints, the loss log and the progress. A PhaseUNet run
// needs the run folder's VAE checkpoint (the VAE is frozen); one started from InitFrom
// without it takes the folder's. It checkpoints every CheckpointEvery steps and at the
// end; when ctx is cancelled (Ctrl-C) on any rank, every rank stops after the current step
// and the checkpoint is written too.
func RunRank(ctx stdcontext.Context, b backends.Backend, o Options, peers Peers) (Result, error) {
	if peers == nil {
		peers = solo{}
	}
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if peers.Rank() != 0 {
		o.Progress = nil
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("train: %w", err)
	}
	cfgs := TinyConfigs()
	if o.Configs != nil {
		cfgs = *o.Configs
	}
	ucfg, vcfg, ccfg, err := cfgs.Parsed()
	if err != nil {
		return Result{}, err
	}
	if o.Resume && o.EMA == 0 {
		if o.EMA, err = checkpointEMADecay(StatePath(o.Dir, o.Phase)); err != nil {
			return Result{}, err
		}
	}
	if o.EMA > 0 && o.Progress != nil {
		fmt.Fprintf(o.Progress, "train %s: weights EMA with decay %g\n", o.Phase, o.EMA)
	}
	if peers.Rank() == 0 {
		if err := seedVAEFromInit(ctx, b, o); err != nil {
			return Result{}, err
		}
	}
	if err := peers.Barrier(stdcontext.WithoutCancel(ctx)); err != nil {
		return Result{}, fmt.Errorf("train: wait for rank 0 to prepare the run folder: %w", err)
	}
	var ph phase
	switch o.Phase {
	case PhaseVAE:
		ph, err = newVAEPhase(b, o, vcfg)
	case PhaseFineTune:
		var fp *fineTunePhase
		if fp, err = newFineTunePhase(b, o); err == nil {
			defer fp.close()
			ph = fp
		}
	default:
		ph, err = newUNetPhase(b, o, ucfg, vcfg, ccfg)
	}
	if err != nil {
		return Result{}, err
	}
	if up, ok := ph.(*unetPhase); ok && o.EncodeWorkers > 0 {
		// Rank 0 encodes and writes the cache; the others then read it.
		if peers.Rank() == 0 {
			if err := up.fz.encodeAhead(ctx, o.Train, o.EncodeWorkers, o.Progress); err != nil {
				return Result{}, err
			}
		}
		if err := peers.Barrier(stdcontext.WithoutCancel(ctx)); err != nil {
			return Result{}, fmt.Errorf("train: wait for rank 0 to encode the clips: %w", err)
		}
		if peers.Rank() != 0 {
			up.fz.loadLatentCache()
		}
	}
	s, err := newStepper(b, ph.ctx(), o.LR, o.EMA, ph.loss())
	if err != nil {
		return Result{}, err
	}
	res, err := loop(ctx, o, ph, s, peers)
	if err != nil && peers.Size() > 1 {
		err = fmt.Errorf("rank %d: %w", peers.Rank(), err)
	}
	return res, err
}

// seedVAEFromInit gives a new UNet phase started from a diffusers folder (InitFrom) the
// folder's VAE when the run folder has no VAE checkpoint yet: the UNet trains on the latents
// of the VAE it will be shipped with, and Export finds both halves in the run folder. An
// existing VAE checkpoint is kept (it may be one trained for this run).
func seedVAEFromInit(ctx stdcontext.Context, b backends.Backend, o Options) error {
	if o.Phase != PhaseUNet || o.InitFrom == "" || o.Resume {
		return nil
	}
	if _, err := os.Stat(StatePath(o.Dir, PhaseVAE)); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	v := o
	v.Phase, v.Steps, v.EMA, v.CheckpointEvery = PhaseVAE, 0, 0, 0
	if _, err := Run(ctx, b, v); err != nil {
		return fmt.Errorf("train: VAE checkpoint from --init-from %s: %w", o.InitFrom, err)
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "train unet: frozen VAE taken from %s (%s)\n", o.InitFrom, StatePath(o.Dir, PhaseVAE))
	}
	return nil
}

// phase is one phase's model state and batch maker.
type phase interface {
	ctx() *context.Context
	step() int // steps done when the phase was opened
	meta() map[string]string
	// loss is the phase's training loss (then its metrics) on one microbatch.
	loss() lossFunc
	// examples returns the inputs of examples [lo, hi) of step k's batch of Options.Batch,
	// each input stacked along its first axis. An example's values depend on the seed, k
	// and its index only, whatever lo and hi: the batch of step k is the same however the
	// ranks split it.
	examples(k, lo, hi int) ([]*tensor.Dense, error)
	// flush writes what the phase caches in the run folder; it runs at every checkpoint.
	flush() error
}

// openContext restores the phase's checkpoint (Resume) or initialises weights.
func openContext(o Options, init func() (map[string]*tensor.Dense, error)) (*context.Context, int, map[string]string, error) {
	path := StatePath(o.Dir, o.Phase)
	if o.Resume {
		ctx, meta, err := loadContext(path)
		if err != nil {
			return nil, 0, nil, err
		}
		step, err := strconv.Atoi(meta["step"])
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%w: %s: step %q", ErrCheckpoint, path, meta["step"])
		}
		// Checkpoints from before the hash was recorded carry none.
		if want, ok := meta[metaStateHash]; ok {
			h, err := stateHash(ctx)
			if err != nil {
				return nil, 0, nil, err
			}
			if got := strconv.FormatUint(h, 16); got != want {
				return nil, 0, nil, fmt.Errorf("%w: %s: the restored state hashes to %s, the checkpoint recorded %s", ErrCheckpoint, path, got, want)
			}
		}
		// Checkpoints from before the rule was recorded carry none and resume as they are.
		if r, ok := meta[metaDataRule]; ok && r != o.Rule.String() {
			return nil, 0, nil, fmt.Errorf("%w: %s was trained on the %s dataset rule, not %s", ErrOptions, path, r, o.Rule)
		}
		return ctx, step, meta, nil
	}
	w, err := init()
	if err != nil {
		return nil, 0, nil, err
	}
	md := map[string]string{}
	if o.InitFrom != "" {
		if w, md, err = initFromFolder(o, w); err != nil {
			return nil, 0, nil, err
		}
	}
	return newContext(w), 0, md, nil
}

// metaDataRule is the checkpoint metadata key of the dataset rule a phase trains on.
const metaDataRule = "data_rule"

// metaVAEFrames is the VAE checkpoint's metadata key of the clip length its temporal
// decoder last trained on (Export's decode chunk); a VAE taken from --init-from records
// that folder's decode chunk instead. Checkpoints from before it was recorded lack it.
const metaVAEFrames = "vae_frames"

// rngFor returns the random stream of step k of a phase.
func rngFor(o Options, k int) *rand.Rand {
	tag := uint64(1)
	if o.Phase == PhaseUNet {
		tag = 2
	}
	return rand.New(rand.NewPCG(o.Seed*1000003+tag, uint64(k)))
}

func normal(r *rand.Rand, shape ...int) *tensor.Dense {
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}

// ---- VAE phase ----

type vaePhase struct {
	o    Options
	cfg  vae.Config
	c    *context.Context
	from int
	md   map[string]string // the metadata of the checkpoint or folder it started from
	// trained is set once the phase has made a batch to train on.
	trained bool
}

func newVAEPhase(b backends.Backend, o Options, cfg vae.Config) (*vaePhase, error) {
	if f := cfg.DownsampleFactor(); o.VAECrop%f != 0 {
		return nil, fmt.Errorf("%w: crop %d is not a multiple of the VAE's downsampling factor %d", ErrOptions, o.VAECrop, f)
	}
	ctx, from, md, err := openContext(o, func() (map[string]*tensor.Dense, error) {
		exp, err := vae.ExpectedTensors(cfg)
		if err != nil {
			return nil, err
		}
		w := InitWeights(exp, o.Seed, 0)
		initLogVar(w, cfg.LatentChannels)
		return w, nil
	})
	if err != nil {
		return nil, err
	}
	if o.DecoderOnly {
		for v := range ctx.IterVariables() {
			if v.Scope() == context.RootScope && isEncoderTensor(v.Name()) {
				v.SetTrainable(false)
			}
		}
	}
	return &vaePhase{o: o, cfg: cfg, c: ctx, from: from, md: md}, nil
}

// initLogVarBias is the initial log-variance of the VAE posterior (std ≈ 0.018).
const initLogVarBias = -8

// initLogVar sets the log-variance half of quant_conv's bias to initLogVarBias. With the
// default near-zero init the posterior starts at std 1 around a near-zero mean: the decoder
// sees noise, learns the mean frame (the plain background here) and the encoder gets almost
// no gradient, so training sat at the background-only loss for hundreds of steps. Released
// VAEs have log-variances far below zero; starting there lets z carry the image at once.
func initLogVar(w map[string]*tensor.Dense, latent int) {
	if b, ok := w["quant_conv.bias"]; ok && len(b.Data) == 2*latent {
		for i := latent; i < 2*latent; i++ {
			b.Data[i] = initLogVarBias
		}
	}
}

func (p *vaePhase) ctx() *context.Context { return p.c }
func (p *vaePhase) step() int             { return p.from }
func (p *vaePhase) flush() error          { return nil }

func (p *vaePhase) loss() lossFunc {
	frames := vaeFrames(p.o)
	return func(s nn.Scope, in []*graph.Node) []*graph.Node {
		loss, mse := vaeLoss(s, p.cfg, in[0], in[1], frames)
		return []*graph.Node{loss, mse}
	}
}

// meta records the clip length the VAE last trained on (Export's decode chunk): this run's
// once it has trained a step, else what its checkpoint or --init-from folder said.
func (p *vaePhase) meta() map[string]string {
	frames := p.md[metaVAEFrames]
	if p.trained {
		frames = strconv.Itoa(vaeFrames(p.o))
	}
	if frames == "" {
		return map[string]string{}
	}
	return map[string]string{metaVAEFrames: frames}
}

// vaeFrames is the VAE phase's clip length.
func vaeFrames(o Options) int {
	if o.VAEFrames > 0 {
		return min(o.VAEFrames, procedural.ConfigFor(o.Rule).Frames)
	}
	return procedural.ConfigFor(o.Rule).Frames
}

// examples draws the whole batch's random numbers in example order (every rank replays
// the draws of the examples it does not make) and renders only examples [lo, hi).
func (p *vaePhase) examples(k, lo, hi int) ([]*tensor.Dense, error) {
	p.trained = true
	dc := procedural.ConfigFor(p.o.Rule)
	dc.Frames = vaeFrames(p.o)
	r := rngFor(p.o, k)
	n := p.o.Batch
	cs := dc.Height
	if p.o.VAECrop > 0 {
		cs = min(p.o.VAECrop, dc.Height, dc.Width)
	}
	x := tensor.New((hi-lo)*dc.Frames, 3, cs, cs)
	plane := cs * cs
	for i := 0; i < n; i++ {
		idx := r.IntN(p.o.Train)
		oy, ox := cropAt(r, procedural.NewScene(dc, p.o.Data, procedural.Train, idx), dc, cs)
		if i < lo || i >= hi {
			continue
		}
		v := procedural.ToTensor(procedural.Video(dc, p.o.Data, procedural.Train, idx))
		for f := 0; f < dc.Frames; f++ {
			for c := 0; c < 3; c++ {
				dst := x.Data[(((i-lo)*dc.Frames+f)*3+c)*plane:]
				src := v.Data[(f*3+c)*dc.Height*dc.Width:]
				for y := 0; y < cs; y++ {
					copy(dst[y*cs:(y+1)*cs], src[(oy+y)*dc.Width+ox:(oy+y)*dc.Width+ox+cs])
				}
			}
		}
	}
	f := p.cfg.DownsampleFactor()
	eps := normal(r, n*dc.Frames, p.cfg.LatentChannels, cs/f, cs/f)
	return []*tensor.Dense{x, rows(eps, lo*dc.Frames, hi*dc.Frames)}, nil
}

// rows returns rows [lo, hi) of t's first axis as a new tensor.
func rows(t *tensor.Dense, lo, hi int) *tensor.Dense {
	per := len(t.Data) / t.Shape[0]
	shape := append([]int{hi - lo}, t.Shape[1:]...)
	return &tensor.Dense{Shape: shape, Data: append([]float32(nil), t.Data[lo*per:hi*per]...)}
}

// cropAt picks the top-left corner of a cs x cs crop of a clip: a window around a random
// object of frame 0 (its centre anywhere in the window's middle half). Random windows
// showed only background about half the time at 32x32, and the colours of the few objects
// are what a VAE learns last; every crop now carries one.
func cropAt(r *rand.Rand, sc procedural.Scene, dc procedural.Config, cs int) (oy, ox int) {
	if cs >= dc.Height && cs >= dc.Width || len(sc.Objects) == 0 {
		return r.IntN(dc.Height - cs + 1), r.IntN(dc.Width - cs + 1)
	}
	o := sc.Objects[r.IntN(len(sc.Objects))]
	at := func(c float64, size int) int {
		start := int(c) - cs/2 + r.IntN(cs/2+1) - cs/4
		return min(max(start, 0), size-cs)
	}
	return at(o.Y, dc.Height), at(o.X, dc.Width)
}

// initFromFolder replaces the initial weights w by the phase's component of the diffusers
// folder o.InitFrom (same names and shapes required). For the UNet phase it also returns
// the folder's VAE scaling factor as checkpoint metadata, so latents keep their scale.
func initFromFolder(o Options, w map[string]*tensor.Dense) (map[string]*tensor.Dense, map[string]string, error) {
	ck, err := checkpoint.Open(o.InitFrom)
	if err != nil {
		return nil, nil, fmt.Errorf("train: --init-from: %w", err)
	}
	comp := vae.Component
	if o.Phase == PhaseUNet {
		comp = unet.Component
	}
	exp := make(map[string][]int, len(w))
	for n, t := range w {
		exp[n] = t.Shape
	}
	loaded, err := ck.LoadComponent(comp, "", exp, checkpoint.LoadOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("train: --init-from: %w", err)
	}
	md := map[string]string{}
	if o.Phase == PhaseVAE {
		// The folder's decode chunk stands for the clip length its decoder trained on.
		smp, err := checkpoint.ReadSampling(o.InitFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("train: --init-from: %w", err)
		}
		frames := smp.DecodeChunkSize
		if frames <= 0 {
			frames = procedural.ConfigFor(o.Rule).Frames // decoded whole
		}
		md[metaVAEFrames] = strconv.Itoa(frames)
	}
	if o.Phase == PhaseUNet {
		vc, err := vae.ReadConfig(ck)
		if err != nil {
			return nil, nil, err
		}
		md["scaling_factor"] = strconv.FormatFloat(vc.ScalingFactor, 'g', -1, 64)
	}
	return loaded, md, nil
}
