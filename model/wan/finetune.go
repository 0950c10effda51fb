package wan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/train/finetune"
)

var _ finetune.Tuner = wanFamily{}

// FineTuneTextLen is the number of rows of the fixed prompt embedding a fine-tune
// conditions every example on (the clips have no captions: the fine-tune learns the
// clips' distribution under one "prompt").
const FineTuneTextLen = 8

// Seed tags of the fine-tune's random streams.
const (
	fineTuneTrainTag   = 0x77616e74 // "want"
	fineTuneHeldOutTag = 0x77616e68 // "wanh"
	fineTuneTextTag    = 0x77616e70 // "wanp"
)

// FineTune implements finetune.Tuner for a text-to-video Wan folder: one expert (o.Expert,
// 1 = `transformer`, 2 = `transformer_2`; 0 picks the low-noise expert where there are two)
// trained with the flow-matching loss Wan was trained with. A clip's latents are its
// first 1 + 4k frames encoded by the folder's VAE (the posterior mean), normalised as
// WanPipeline does (latents_mean, latents_std); an example draws a clip, a noise level σ and
// Gaussian noise ε, and the expert, given x_σ = (1 − σ)·x0 + σ·ε at timestep
// σ·num_train_timesteps and the fixed prompt embedding, must predict the velocity ε − x0
// (mean squared error). σ is u shifted by the scheduler's flow shift (shift·u / (1 +
// (shift − 1)·u), as the sampler spaces its steps), u uniform over the values whose σ
// falls in the expert's range of timesteps (t ≥ boundary for `transformer`, t < boundary
// for `transformer_2`). The network is transformer.Build, the code inference runs.
func (wanFamily) FineTune(dir string, o finetune.Options) (finetune.Task, error) {
	f, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if f.Variant() == ImageToVideo {
		return nil, fmt.Errorf("%w: %s: fine-tuning an image-to-video transformer (%s) is not supported", ErrFolder, f.Dir, f.Index.ClassName)
	}
	if f.ExpandTimesteps {
		return nil, fmt.Errorf("%w: %s: fine-tuning a transformer with expand_timesteps (per-token timesteps) is not supported", ErrFolder, f.Dir)
	}
	expert := o.Expert
	if expert == 0 {
		expert = f.Experts()
	}
	tdir, err := f.TransformerDir(expert)
	if err != nil {
		return nil, err
	}
	cfg, err := transformer.ReadConfig(tdir)
	if err != nil {
		return nil, err
	}
	if cfg.HasImage() {
		return nil, fmt.Errorf("%w: %s: fine-tuning a transformer with an image branch is not supported", ErrFolder, tdir)
	}
	sc, err := f.ReadSchedulerConfig()
	if err != nil {
		return nil, err
	}
	shift := 1.0
	switch {
	case sc.Class == FlowMatchClass:
		shift = sc.FlowMatch.Shift
	case sc.UniPC.UseFlowSigmas:
		shift = sc.UniPC.FlowShift
	}
	numTrain := sc.NumTrainTimesteps()
	lo, hi := 0.0, 1.0
	if b, ok := f.BoundaryTimestep(numTrain); ok {
		if expert == 1 {
			lo = b / float64(numTrain)
		} else {
			hi = b / float64(numTrain)
		}
	}
	vcfg, err := f.VAEConfig()
	if err != nil {
		return nil, err
	}
	if o.Clips.Train == nil || o.Clips.HeldOut == nil || o.Clips.TrainCount < 1 {
		return nil, fmt.Errorf("wan: fine-tune: no training clips")
	}
	v, err := vae.Load(f.ComponentDir(VAE), "", o.Backend)
	if err != nil {
		return nil, err
	}
	t := &fineTune{f: f, expert: expert, tdir: tdir, cfg: cfg, vae: v, vcfg: vcfg, seed: o.Seed, clips: o.Clips,
		shift: shift, numTrain: numTrain, sigmaLo: lo, sigmaHi: hi,
		train: map[int]*tensor.Dense{}, held: map[int]*tensor.Dense{}}
	r := rand.New(rand.NewPCG(o.Seed, fineTuneTextTag))
	t.text = tensor.New(FineTuneTextLen, cfg.TextDim)
	for i := range t.text.Data {
		t.text.Data[i] = float32(r.NormFloat64())
	}
	return t, nil
}

// fineTune is Wan's finetune.Task.
type fineTune struct {
	f        *Folder
	expert   int
	tdir     string
	cfg      transformer.Config
	vae      *vae.VAE
	vcfg     vae.Config
	seed     uint64
	clips    finetune.Clips
	shift    float64
	numTrain int
	// sigmaLo, sigmaHi bound the noise levels of the expert's timesteps.
	sigmaLo, sigmaHi float64
	text             *tensor.Dense // the fixed prompt embedding [FineTuneTextLen, text_dim]

	mu          sync.Mutex
	train, held map[int]*tensor.Dense // normalised latents [z, f, h, w] by clip index
}

func (t *fineTune) Describe() string {
	return fmt.Sprintf("%s of %s (flow matching, sigma in [%.4g, %.4g), shift %g)", filepath.Base(t.tdir), t.f.Dir, t.sigmaLo, t.sigmaHi, t.shift)
}

func (t *fineTune) Weights() (map[string]*tensor.Dense, error) {
	exp, err := transformer.ExpectedTensors(t.cfg)
	if err != nil {
		return nil, err
	}
	w, err := checkpoint.LoadDir(t.tdir, transformer.WeightsStem, exp, checkpoint.LoadDirOptions{LoadOptions: checkpoint.LoadOptions{Ignore: transformer.IgnoredTensors(t.cfg)}})
	if err != nil {
		return nil, fmt.Errorf("wan: fine-tune: %w", err)
	}
	return w, nil
}

// Loss is the flow-matching loss: inputs x0 and ε [B, z, f, h, w], σ [B] and the prompt
// embedding [B, L, text_dim].
func (t *fineTune) Loss(s nn.Scope, in []*Node) []*Node {
	x0, noise, sigma, ehs := in[0], in[1], in[2], in[3]
	b := x0.Shape().Dim(0)
	sg := Reshape(sigma, b, 1, 1, 1, 1)
	xt := Add(Mul(OneMinus(sg), x0), Mul(sg, noise))
	timestep := MulScalar(sigma, float64(t.numTrain))
	pred := transformer.Build(s, t.cfg, xt, timestep, ehs, nil)
	return []*Node{ReduceAllMean(Square(Sub(pred, Sub(noise, x0))))}
}

// Examples draws example i of step k from a stream keyed by (seed, k, i): a training clip,
// u for σ, then the noise.
func (t *fineTune) Examples(k, lo, hi int) ([]*tensor.Dense, error) {
	return t.examples(lo, hi, func(i int) (*rand.Rand, bool) {
		return rand.New(rand.NewPCG(t.seed^fineTuneTrainTag, uint64(k)<<24^uint64(i))), false
	})
}

// HeldOut draws held-out example i (clip i) from a stream keyed by (seed, i).
func (t *fineTune) HeldOut(lo, hi int) ([]*tensor.Dense, error) {
	return t.examples(lo, hi, func(i int) (*rand.Rand, bool) {
		return rand.New(rand.NewPCG(t.seed^fineTuneHeldOutTag, uint64(i))), true
	})
}

func (t *fineTune) examples(lo, hi int, stream func(i int) (*rand.Rand, bool)) ([]*tensor.Dense, error) {
	n := hi - lo
	var x0, noise *tensor.Dense
	sigma := tensor.New(n)
	ehs := tensor.New(n, FineTuneTextLen, t.cfg.TextDim)
	uLo, uHi := unshift(t.shift, t.sigmaLo), unshift(t.shift, t.sigmaHi)
	for e := range n {
		r, held := stream(lo + e)
		idx := lo + e
		if !held {
			idx = r.IntN(t.clips.TrainCount)
		}
		lat, err := t.latents(idx, held)
		if err != nil {
			return nil, err
		}
		if x0 == nil {
			x0 = tensor.New(append([]int{n}, lat.Shape...)...)
			noise = tensor.New(x0.Shape...)
		}
		per := len(lat.Data)
		copy(x0.Data[e*per:], lat.Data)
		u := uLo + (uHi-uLo)*r.Float64()
		sigma.Data[e] = float32(t.shift * u / (1 + (t.shift-1)*u))
		for j := range per {
			noise.Data[e*per+j] = float32(r.NormFloat64())
		}
		copy(ehs.Data[e*len(t.text.Data):], t.text.Data)
	}
	return []*tensor.Dense{x0, noise, sigma, ehs}, nil
}

// unshift inverts the flow shift: the u whose shifted value is sigma.
func unshift(shift, sigma float64) float64 { return sigma / (shift - (shift-1)*sigma) }

// latents returns the normalised latents of a training or held-out clip, encoding it the
// first time.
func (t *fineTune) latents(i int, held bool) (*tensor.Dense, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cache, clip := t.train, t.clips.Train
	if held {
		cache, clip = t.held, t.clips.HeldOut
	}
	if l, ok := cache[i]; ok {
		return l, nil
	}
	frames := clip(i) // [F, 3, H, W]
	if len(frames.Shape) != 4 || frames.Shape[1] != 3 {
		return nil, fmt.Errorf("wan: fine-tune: clip %d has shape %v, want [frames, 3, height, width]", i, frames.Shape)
	}
	tf := t.vcfg.TemporalFactor()
	f := 1 + (frames.Shape[0]-1)/tf*tf
	h, w := frames.Shape[2], frames.Shape[3]
	video := tensor.New(1, 3, f, h, w) // [B, C, F, H, W]
	plane := h * w
	for c := range 3 {
		for fr := range f {
			copy(video.Data[(c*f+fr)*plane:(c*f+fr+1)*plane], frames.Data[(fr*3+c)*plane:(fr*3+c+1)*plane])
		}
	}
	post, err := t.vae.Encode(video)
	if err != nil {
		return nil, fmt.Errorf("wan: fine-tune: encode clip %d: %w", i, err)
	}
	norm, err := t.vcfg.Normalize(post.Mode())
	if err != nil {
		return nil, err
	}
	l := &tensor.Dense{Shape: norm.Shape[1:], Data: norm.Data}
	cache[i] = l
	return l, nil
}

// FineTunePromptFile is the file Export writes beside the components: the fixed prompt
// embedding [1, FineTuneTextLen, text_dim] the fine-tune conditioned every example on (as
// prompt_embeds), for `vdpp generate --prompt-embeds`.
const FineTunePromptFile = "finetune_prompt_embeds.safetensors"

// Export writes out as the fine-tuned folder: the trained expert's folder with its config
// and the given weights, every other entry a symbolic link to the original, and the
// fine-tune's prompt embedding (FineTunePromptFile).
func (t *fineTune) Export(out string, weights map[string]*tensor.Dense) error {
	src, err := filepath.Abs(t.f.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("wan: export: %w", err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("wan: export: %w", err)
	}
	trained := filepath.Base(t.tdir)
	prompt := &tensor.Dense{Shape: append([]int{1}, t.text.Shape...), Data: t.text.Data}
	if err := safetensors.WriteFile(filepath.Join(out, FineTunePromptFile), []safetensors.NamedTensor{{Name: "prompt_embeds", Tensor: prompt}}, nil); err != nil {
		return fmt.Errorf("wan: export: %w", err)
	}
	for _, e := range entries {
		if e.Name() == FineTunePromptFile {
			continue
		}
		dst := filepath.Join(out, e.Name())
		if err := os.RemoveAll(dst); err != nil {
			return fmt.Errorf("wan: export: %w", err)
		}
		if e.Name() != trained {
			if err := os.Symlink(filepath.Join(src, e.Name()), dst); err != nil {
				return fmt.Errorf("wan: export: %w", err)
			}
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("wan: export: %w", err)
		}
		cfg, err := os.ReadFile(filepath.Join(t.tdir, "config.json"))
		if err != nil {
			return fmt.Errorf("wan: export: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, "config.json"), cfg, 0o644); err != nil {
			return fmt.Errorf("wan: export: %w", err)
		}
		if err := safetensors.WriteMapFile(filepath.Join(dst, transformer.WeightsStem+".safetensors"), weights, map[string]string{"format": "pt"}); err != nil {
			return fmt.Errorf("wan: export: %w", err)
		}
	}
	return nil
}

func (t *fineTune) Close() error { return t.vae.Close() }
