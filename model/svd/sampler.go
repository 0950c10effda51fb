package svd

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/unetcost"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// FamilyName is the name SVD registers under in model/family.
const FamilyName = "svd"

// PipelineClass is the model_index.json _class_name of SVD folders.
const PipelineClass = "StableVideoDiffusionPipeline"

// Scheduler is the scheduler's folder in an SVD pipeline folder (its
// scheduler_config.json). The networks name their own: unet.Component, vae.Component,
// clip.Component and clip.FeatureExtractorComponent.
const Scheduler = "scheduler"

func init() { family.Register(svdFamily{}) }

// svdFamily is SVD's family.Family.
type svdFamily struct{}

func (svdFamily) Name() string             { return FamilyName }
func (svdFamily) NeedsDir() bool           { return true }
func (svdFamily) Claims(class string) bool { return class == PipelineClass || class == "" }

func (svdFamily) Preflight(dir string, o family.Options) error {
	if err := o.Weights.Check(FamilyName, unet.Component); err != nil {
		return err
	}
	_, err := PreflightWith(dir, loadOptions(o), partsOf(o.Roles))
	return err
}

// loadOptions are the load options of a family's options: the folder's variant, and the
// file --unet names.
func loadOptions(o family.Options) LoadOptions {
	hold, _ := nn.HoldFor(o.Weights.DType) // checked by WeightOptions.Check
	return LoadOptions{Variant: o.Variant, UNetFile: o.Weights.File(unet.Component), Hold: hold}
}

// Weights implements family.Weigher: the bytes of the networks each role loads, from the
// configs (the image encoder and the VAE encoder condition, the UNet denoises, the VAE
// decoder decodes): the UNet as nn.NewWeightsHeld holds it on o.Backend
// (nn.HoldingForSpec: its stored types, the folder's or --unet's, held as o.Weights.DType
// says), the others in float32.
func (svdFamily) Weights(dir string, o family.Options) (family.Weights, error) {
	if err := o.Weights.Check(FamilyName, unet.Component); err != nil {
		return family.Weights{}, err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return family.Weights{}, err
	}
	ucfg, err := unet.ReadConfig(ck)
	if err != nil {
		return family.Weights{}, err
	}
	vcfg, err := vae.ReadConfig(ck)
	if err != nil {
		return family.Weights{}, err
	}
	ccfg, err := clip.ReadConfig(ck)
	if err != nil {
		return family.Weights{}, err
	}
	u, err := unet.ExpectedTensors(ucfg)
	if err != nil {
		return family.Weights{}, err
	}
	enc, dec, err := vae.SplitTensors(vcfg)
	if err != nil {
		return family.Weights{}, err
	}
	c, err := clip.ExpectedTensors(ccfg)
	if err != nil {
		return family.Weights{}, err
	}
	lo := loadOptions(o)
	uo := unet.LoadOptions{Variant: lo.Variant, File: lo.UNetFile, Hold: lo.Hold}
	types := map[string]quant.Type{}
	st, err := unet.OpenWeights(ck, ucfg, uo)
	switch {
	case err == nil:
		for _, n := range st.Names() {
			types[n], _ = st.Type(n)
		}
		st.Close()
	case uo.File == "" && errors.Is(err, checkpoint.ErrWeights): // a folder of configs: float32
	default:
		return family.Weights{}, err
	}
	holding, err := nn.HoldingForSpec(o.Backend)
	if err != nil {
		return family.Weights{}, err
	}
	held, err := nn.HeldTypes(holding, u, func(n string) quant.Type {
		if t, ok := types[n]; ok {
			return t
		}
		return quant.F32
	}, uo.Hold)
	if err != nil {
		return family.Weights{}, err
	}
	w := family.Weights{Condition: nn.Float32Bytes(c) + nn.Float32Bytes(enc), Decode: nn.Float32Bytes(dec), Types: map[string]int64{}}
	var denoiser int64
	for t, n := range held {
		denoiser += n
		w.Types[t.String()] += n
	}
	w.Denoisers = []int64{denoiser}
	w.Types["f32"] += w.Condition + w.Decode
	return w, nil
}

var _ family.Weigher = svdFamily{}

// Describe implements family.Family: the UNet's frame count, the native size, the folder's
// guidance and decode chunk (vdpp_sampling.json), the VAE's factor.
func (svdFamily) Describe(dir string) (family.Description, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return family.Description{}, err
	}
	p := &Pipeline{Checkpoint: ck}
	if p.UNetConfig, err = unet.ReadConfig(ck); err != nil {
		return family.Description{}, err
	}
	if p.VAEConfig, err = vae.ReadConfig(ck); err != nil {
		return family.Description{}, err
	}
	smp, err := checkpoint.ReadSampling(dir)
	if err != nil {
		return family.Description{}, err
	}
	return family.Description{Defaults: NewSampler(p, smp).DefaultParams(), SizeMultiple: p.VAEConfig.DownsampleFactor(), VAETiling: true, Image: family.NeedRequired,
		Caching: Caching, Schedulers: sched.KarrasSamplers}, nil
}

func (svdFamily) Open(dir string, o family.Options) (family.Sampler, error) {
	if dir == "" {
		return nil, fmt.Errorf("svd: a model folder is required")
	}
	if err := o.Weights.Check(FamilyName, unet.Component); err != nil {
		return nil, err
	}
	var b backends.Backend
	if parts := partsOf(o.Roles); parts != (Parts{}) {
		var err error
		if b, err = nn.NewBackend(o.Backend); err != nil {
			return nil, err
		}
	}
	lo := loadOptions(o)
	if o.Roles.Denoise && len(o.LoRAs.For(1)) > 0 {
		set, err := loraSet(dir, o.LoRAs, o.LoRADir)
		if err != nil {
			return nil, err
		}
		lo.UNetDeltas = nnDeltas(set)
	}
	p, err := LoadWith(dir, lo, b, partsOf(o.Roles))
	if err != nil {
		return nil, err
	}
	smp, err := checkpoint.ReadSampling(dir)
	if err != nil {
		return nil, p.closeAfter(err)
	}
	return NewSampler(p, smp), nil
}

func partsOf(r family.Roles) Parts {
	return Parts{Conditioner: r.Condition, Denoiser: r.Denoise, Decoder: r.Decode}
}

// Sampler is SVD's family.Sampler around a loaded Pipeline: CLIP image embedding, VAE
// encoding of the noise-augmented image and added time ids on the first stage, the UNet
// with per-frame guidance and the Euler scheduler on every stage, the chunked VAE decode
// on the last.
type Sampler struct {
	P        *Pipeline
	sampling checkpoint.Sampling
	// release, when set, is what Close releases instead of P: a Sampler that borrows P
	// from another (WithDenoiserWeights) owns only its own UNet.
	release func() error

	// The image inputs of the last Prepare, reused while the image and size stay the same
	// (preprocessing is deterministic, so this only saves time).
	mu               sync.Mutex
	lastImg          image.Image
	lastH, lastW     int
	clipPx, vaeImage *tensor.Dense
}

var (
	_ family.Sampler             = (*Sampler)(nil)
	_ family.ActivationEstimator = (*Sampler)(nil)
	_ family.ConditionEstimator  = (*Sampler)(nil)
	_ family.RandomConditioner   = (*Sampler)(nil)
	_ family.WindowGuider        = (*Sampler)(nil)
)

// NewSampler wraps a loaded pipeline whose default guidance and decode chunk are smp's
// (the folder's vdpp_sampling.json); the Sampler owns p from now on.
func NewSampler(p *Pipeline, smp checkpoint.Sampling) *Sampler {
	return &Sampler{P: p, sampling: smp}
}

// Family implements family.Sampler.
func (s *Sampler) Family() string { return FamilyName }

// DefaultParams implements family.Sampler: the pipeline's defaults (DefaultParams) with the
// folder's guidance and decode chunk, and the frames, size and steps its vdpp_sampling.json
// sets (family.WithSampling).
func (s *Sampler) DefaultParams() family.Params {
	p := s.P.DefaultParams()
	p.MinGuidance, p.MaxGuidance, p.DecodeChunkSize = s.sampling.MinGuidance, s.sampling.MaxGuidance, s.sampling.DecodeChunkSize
	return family.WithSampling(p, s.sampling)
}

// Validate implements family.Sampler: Pipeline.Validate, whose ErrParams is
// family.ErrParams.
func (s *Sampler) Validate(p family.Params) error { return s.P.Validate(p) }

// LatentShape implements family.Sampler.
func (s *Sampler) LatentShape(p family.Params) []int { return s.P.LatentShape(p) }

// Scheduler implements family.Sampler: the sampler p.Scheduler names (sched.KarrasSamplers:
// euler, the folder's Euler scheduler, by default) on the folder's Karras schedule.
func (s *Sampler) Scheduler(p family.Params) (sched.Scheduler, error) {
	return sched.NewKarrasNamed(p.Scheduler, s.P.Sched, p.Steps)
}

// Prepare implements family.Sampler, as diffusers' pipeline does for each sample: its noise
// (augmentation noise, then the initial latent, from the stream keyed by (p.Seed, sample)),
// the conditioning of the augmented image, and the latent times init_noise_sigma.
func (s *Sampler) Prepare(ctx context.Context, in family.Input, p family.Params, sc sched.Scheduler, samples []int64) (*pipeline.Item, error) {
	if in.Image == nil {
		return nil, fmt.Errorf("svd: prepare: no image")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.Validate(p); err != nil {
		return nil, err
	}
	if sc.NumSteps() != p.Steps {
		return nil, fmt.Errorf("svd: prepare: a schedule of %d steps for %d", sc.NumSteps(), p.Steps)
	}
	clipPx, vaeImg, err := s.preprocess(in.Image, p)
	if err != nil {
		return nil, err
	}
	shape := s.P.LatentShape(p)
	per := tensor.NumElements(shape)
	it := &pipeline.Item{Samples: samples, Latent: tensor.New(append([]int{len(samples)}, shape...)...),
		SchedState: sched.InitialState(sc, p.Seed, samples)}
	sigma := sc.InitSigma()
	for r, sample := range samples {
		aug, init := s.P.Noise(p, sample)
		c, err := s.P.Condition(clipPx, vaeImg, aug, p)
		if err != nil {
			return nil, err
		}
		dst := it.Latent.Data[r*per : (r+1)*per]
		for i, v := range init.Data {
			dst[i] = v * sigma
		}
		it.Cond = append(it.Cond, c.Cond)
	}
	if p.Guided() {
		it.Guidance = sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), p.NumFrames)
	}
	return it, nil
}

// WindowGuidance implements family.WindowGuider: a window of frames frames is guided as a
// whole clip is, rising from MinGuidance on its first frame to MaxGuidance on its last.
func (s *Sampler) WindowGuidance(p family.Params, frames int) []float32 {
	if !p.Guided() {
		return nil
	}
	return sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), frames)
}

func (s *Sampler) preprocess(img image.Image, p family.Params) (clipPx, vaeImg *tensor.Dense, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastImg == img && s.lastH == p.Height && s.lastW == p.Width && isComparable(img) {
		return s.clipPx, s.vaeImage, nil
	}
	if clipPx, vaeImg, err = s.P.Preprocess(img, p); err != nil {
		return nil, nil, err
	}
	s.lastImg, s.lastH, s.lastW, s.clipPx, s.vaeImage = img, p.Height, p.Width, clipPx, vaeImg
	return clipPx, vaeImg, nil
}

// isComparable reports whether img may be compared with == (the standard image types are
// pointers; a value type holding a slice would panic).
func isComparable(img image.Image) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = img == img
	return true
}

// Stepper implements family.Sampler: the UNet denoiser (the process must have loaded it).
func (s *Sampler) Stepper(sc sched.Scheduler) (*pipeline.Stepper, error) {
	if s.P.UNet == nil {
		return nil, fmt.Errorf("svd: this process did not load the UNet")
	}
	return &pipeline.Stepper{Model: &Denoiser{P: s.P}, Sched: sc}, nil
}

// Decode implements family.Sampler: the VAE decode in chunks of p.DecodeChunkSize frames,
// mapped to [0, 1].
func (s *Sampler) Decode(ctx context.Context, latent *tensor.Dense, p family.Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkLatent(latent, p); err != nil {
		return nil, err
	}
	if s.P.VAEDec == nil {
		return nil, fmt.Errorf("svd: this process did not load the VAE decoder")
	}
	dec, err := s.P.vaeFor(s.P.VAEDec, p)
	if err != nil {
		return nil, err
	}
	raw, err := s.P.decodeWith(dec, latent, p.DecodeChunkSize)
	if err != nil {
		return nil, err
	}
	return ToUnit(raw), nil
}

var _ family.ChunkDecoder = (*Sampler)(nil)

// DecodeChunks implements family.ChunkDecoder: Decode's frames, a group of decode chunks at
// a time.
func (s *Sampler) DecodeChunks(ctx context.Context, latent *tensor.Dense, p family.Params, emit func(first int, frames *tensor.Dense) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.checkLatent(latent, p); err != nil {
		return err
	}
	if s.P.VAEDec == nil {
		return fmt.Errorf("svd: this process did not load the VAE decoder")
	}
	dec, err := s.P.vaeFor(s.P.VAEDec, p)
	if err != nil {
		return err
	}
	return s.P.decodeChunksWith(dec, latent, p.DecodeChunkSize, func(first int, raw *tensor.Dense) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(first, ToUnit(raw))
	})
}

// checkLatent checks that latent is p's final latent.
func (s *Sampler) checkLatent(latent *tensor.Dense, p family.Params) error {
	want := s.P.LatentShape(p)
	got := latent.Shape
	if len(got) == 5 && got[0] == 1 {
		got = got[1:]
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("svd: decode: latent %v, want %v for %d frames of %dx%d", latent.Shape, want, p.NumFrames, p.Width, p.Height)
	}
	return nil
}

// DecodeParts implements family.PartDecoder: one part per decode chunk of
// p.DecodeChunkSize frames (one part when the chunk holds every frame). diffusers decodes
// each chunk with num_frames = its length, so the temporal layers never see across chunks
// and the chunks decode independently.
func (s *Sampler) DecodeParts(p family.Params) int {
	return len(decodeChunks(p))
}

// DecodePart implements family.PartDecoder: the frames of decode chunk part, mapped to
// [0, 1]; the same bits as those frames of Decode.
func (s *Sampler) DecodePart(ctx context.Context, latent *tensor.Dense, p family.Params, part int) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	chunks := decodeChunks(p)
	if part < 0 || part >= len(chunks) {
		return nil, fmt.Errorf("%w: svd: decode part %d of %d", family.ErrParams, part, len(chunks))
	}
	want := s.P.LatentShape(p)
	got := latent
	if len(got.Shape) == 5 && got.Shape[0] == 1 {
		got = &tensor.Dense{Shape: got.Shape[1:], Data: got.Data}
	}
	if !slices.Equal(got.Shape, want) {
		return nil, fmt.Errorf("svd: decode: latent %v, want %v for %d frames of %dx%d", latent.Shape, want, p.NumFrames, p.Width, p.Height)
	}
	c := chunks[part]
	raw, err := s.P.Decode(got.Rows(c[0], c[1]), 0)
	if err != nil {
		return nil, err
	}
	return ToUnit(raw), nil
}

// decodeChunks are the [start, end) latent frames of each decode chunk of p (one range when
// the chunk size is 0 or covers every frame), as vae.Model.Decode cuts them.
func decodeChunks(p family.Params) [][2]int {
	n, chunk := max(1, p.NumFrames), p.DecodeChunkSize
	if chunk <= 0 || chunk >= n {
		return [][2]int{{0, n}}
	}
	return tensor.Chunks(n, 0, chunk)
}

// StepActivationBytes implements family.ActivationEstimator: the larger of unetcost's
// peak of one UNet call on p's latent (two rows when guided) and the VAE decode of the
// video (DecodeActivationBytes), which on the pure-Go backend is the job's peak.
func (s *Sampler) StepActivationBytes(p family.Params) int64 {
	return max(s.stepBytes(p), s.DecodeActivationBytes(p))
}

// stepBytes is unetcost's peak of one UNet call on p's latent (one window's for a long
// video, two rows when guided).
func (s *Sampler) stepBytes(p family.Params) int64 {
	lat := s.P.LatentShape(p.StepParams()) // a long video steps one window at a time
	rows := 1
	if p.Guided() {
		rows = 2
	}
	c, err := unetcost.Count(s.P.UNetConfig, unetcost.Shape{Batch: rows, Frames: lat[0], Height: lat[2], Width: lat[3]})
	if err != nil {
		return 0 // a config Open accepted always counts; 0 leaves admission to the other limits
	}
	return int64(c.PeakActivationBytes)
}

// DecodeActivationBytes estimates the resident bytes of Decode on one sample of p
// (vae.Config.DecodeBytes): the decode chunks of p.DecodeChunkSize frames that the
// backend runs at once (nn.RowParallelism), p's VAE tiling, and how the backend runs the
// decoder's convolutions and attention; weights are not included.
func (s *Sampler) DecodeActivationBytes(p family.Params) int64 {
	return s.P.VAEConfig.DecodeBytes(s.decodeShape(p))
}

// decodeShape is the vae.DecodeShape of Decode on p with this sampler's backend.
func (s *Sampler) decodeShape(p family.Params) vae.DecodeShape {
	b := s.P.Backend
	sh := vae.DecodeShape{Frames: p.NumFrames, Height: p.Height, Width: p.Width, Chunk: p.DecodeChunkSize,
		Parallel: nn.RowParallelism(b)}
	if t, err := s.P.tiling(p); err == nil {
		sh.Tile = t.Sample
	}
	if b != nil {
		sh.Fused = nn.UsesKernels(b)
		sh.Im2Col = nn.ConvFormFor(b) == nn.ConvIm2Col
		sh.GoHeap = nn.IsSimpleGo(b)
	}
	return sh
}

// ConditionActivationBytes implements family.ConditionEstimator in unetcost's terms (the
// float32 tensors of the largest layer): the larger of the image encoder's
// (clip.Config.ForwardBytes) and the VAE encoder's on the job's image at full size
// (vae.Config.EncodeActivationBytes), plus the image and its noise-augmented copy.
func (s *Sampler) ConditionActivationBytes(p family.Params) int64 {
	image := 4 * 3 * int64(max(p.Height, 0)) * int64(max(p.Width, 0))
	return max(s.P.CLIPConfig.ForwardBytes(1), s.P.VAEConfig.EncodeActivationBytes(p.Height, p.Width)) + 2*image
}

// WeightBytes implements family.Sampler.
func (s *Sampler) WeightBytes() map[string]int64 { return s.P.WeightBytes() }

// Kernels implements family.KernelReporter: the kernels the networks run with.
func (s *Sampler) Kernels() string {
	if s.P.Backend == nil {
		return ""
	}
	return nn.DescribeKernels(s.P.Backend)
}

// WeightTypes implements family.TypedWeights: the UNet as held, the other networks in
// float32.
func (s *Sampler) WeightTypes() map[string]int64 {
	out := map[string]int64{}
	for c, n := range s.P.WeightBytes() {
		if c != unet.Component {
			out["f32"] += n
		}
	}
	if s.P.UNet != nil {
		for t, n := range s.P.UNet.HeldBytes() {
			out[t.String()] += n
		}
	}
	return out
}

// Close implements family.Sampler.
func (s *Sampler) Close() error {
	if s.release != nil {
		return s.release()
	}
	return s.P.Close()
}

// RandomConditioning implements family.RandomConditioner: an image embedding, image latents
// and the default added time ids (fps 7 -> 6, motion bucket 127, augmentation 0.02), for
// benchmarking the UNet without the image encoder.
func (s *Sampler) RandomConditioning(r *rand.Rand, latent []int) model.Conditioning {
	return RandomConditioning(s.P.UNetConfig, r, latent)
}

// RandomConditioning draws SVD conditioning for a latent [T, C, h, w] from r: the image
// embedding [1, 1, D], the image latents [1, C, h, w] (in that order) and fixed added time ids.
func RandomConditioning(cfg unet.Config, r *rand.Rand, latent []int) model.Conditioning {
	return model.Conditioning{
		KeyImageEmbeddings: randomTensor(r, 1, 1, cfg.CrossAttentionDim[0]),
		KeyImageLatents:    randomTensor(r, 1, latent[1], latent[2], latent[3]),
		KeyAddedTimeIDs:    {Shape: []int{1, 3}, Data: []float32{6, 127, 0.02}},
	}
}

func randomTensor(r *rand.Rand, shape ...int) *tensor.Dense {
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}
