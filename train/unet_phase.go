package train

import (
	"fmt"
	"image"
	"math"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// clipSeedOffset separates the fixed image encoder's seed from the networks' seeds.
const clipSeedOffset = 7919

// CLIPWeights returns the fixed random image encoder of the built-in model for seed.
func CLIPWeights(cfg clip.Config, seed uint64) (map[string]*tensor.Dense, error) {
	exp, err := clip.ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	return InitWeights(exp, seed+clipSeedOffset, 0), nil
}

// unetMixFactor is the initial value of the UNet's spatio-temporal mix factors (diffusers'
// AlphaBlender).
const unetMixFactor = 0.5

// UNetInitWeights returns the UNet's initial (untrained) weights for seed.
func UNetInitWeights(cfg unet.Config, seed uint64) (map[string]*tensor.Dense, error) {
	exp, err := unet.ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	return DenoiserInit(seed)(exp), nil
}

// DenoiserInit returns the UNet phase's initialisation for seed as a function of a
// denoiser's tensor shapes (family.Reinitializer): `vdpp eval`'s untrained baseline is the
// model with these weights, those a training run starts from.
func DenoiserInit(seed uint64) func(shapes map[string][]int) map[string]*tensor.Dense {
	return func(shapes map[string][]int) map[string]*tensor.Dense {
		return InitWeights(shapes, seed, unetMixFactor)
	}
}

// isEncoderTensor reports whether a VAE tensor belongs to the encoder half.
func isEncoderTensor(name string) bool { return !strings.HasPrefix(name, "decoder.") }

// frozen are the networks the UNet phase runs forward only.
type frozen struct {
	enc   *vae.Model
	clip  *clip.Model
	ccfg  clip.Config
	sf    float64
	raw   map[int]*tensor.Dense // unscaled latents [T, C, h, w] by clip index (cached on disk)
	lat   map[int]*tensor.Dense // scaled latents [T, C, h, w] by clip index
	emb   map[int]*tensor.Dense // image embeddings [D] by clip index (cached on disk)
	dc    procedural.Config
	data  uint64
	split procedural.Split

	// newEncoders builds another copy of enc and clip (same weights) for a worker of
	// encodeAhead, so concurrent encodes share no network state.
	newEncoders func() (*vae.Model, *clip.Model, error)

	cachePath  string // LatentCachePath of the run folder
	cacheKey   string // latentCacheKey of these networks and dataset
	cacheDirty bool   // clips were encoded since the cache was last written
}

// newFrozen loads the run folder's VAE encoder and builds the fixed image encoder.
func newFrozen(b backends.Backend, dir string, vcfg vae.Config, ccfg clip.Config, seed, data uint64, rule procedural.Rule) (*frozen, error) {
	vctx, _, err := loadContext(StatePath(dir, PhaseVAE))
	if err != nil {
		return nil, fmt.Errorf("train: the UNet phase needs a trained VAE: %w", err)
	}
	all, err := modelWeights(vctx)
	if err != nil {
		return nil, err
	}
	encW := map[string]*tensor.Dense{}
	for n, t := range all {
		if isEncoderTensor(n) {
			encW[n] = t
		}
	}
	cw, err := CLIPWeights(ccfg, seed)
	if err != nil {
		return nil, err
	}
	newEncoders := func() (*vae.Model, *clip.Model, error) {
		enc, err := vae.NewParts(vcfg, encW, b, true, false)
		if err != nil {
			return nil, nil, err
		}
		cm, err := clip.New(ccfg, cw, b)
		if err != nil {
			return nil, nil, err
		}
		return enc, cm, nil
	}
	enc, cm, err := newEncoders()
	if err != nil {
		return nil, err
	}
	f := &frozen{enc: enc, clip: cm, ccfg: ccfg, newEncoders: newEncoders,
		raw: map[int]*tensor.Dense{}, lat: map[int]*tensor.Dense{}, emb: map[int]*tensor.Dense{},
		dc: procedural.ConfigFor(rule), data: data, split: procedural.Train, cachePath: LatentCachePath(dir)}
	f.cacheKey = latentCacheKey(encW, ccfg, seed+clipSeedOffset, f)
	f.loadLatentCache()
	return f, nil
}

// rawLatents returns the VAE mode of every frame of training clip i, unscaled; the
// result is cached and must not be modified.
func (f *frozen) rawLatents(i int) (*tensor.Dense, error) {
	if l, ok := f.raw[i]; ok {
		return l, nil
	}
	l, err := f.encodeLatents(f.enc, i)
	if err != nil {
		return nil, err
	}
	f.raw[i], f.cacheDirty = l, true
	return l, nil
}

// encodeLatents returns the VAE mode of every frame of training clip i as enc encodes it.
func (f *frozen) encodeLatents(enc *vae.Model, i int) (*tensor.Dense, error) {
	x := procedural.ToTensor(procedural.Video(f.dc, f.data, f.split, i))
	post, err := enc.Encode(x)
	if err != nil {
		return nil, err
	}
	return post.Mode(), nil
}

// scaledLatents returns the cached scaled latents of clip i.
func (f *frozen) scaledLatents(i int) (*tensor.Dense, error) {
	if l, ok := f.lat[i]; ok {
		return l, nil
	}
	raw, err := f.rawLatents(i)
	if err != nil {
		return nil, err
	}
	l := tensor.New(raw.Shape...)
	for j, v := range raw.Data {
		l.Data[j] = v * float32(f.sf)
	}
	f.lat[i] = l
	return l, nil
}

// firstFrame renders frame 0 of training clip i under the run's rule: the image the
// conditioning (CLIP embedding and image latents) is built from. Both must come from
// f.dc itself; a config rebuilt field by field loses the rule and draws another scene.
func (f *frozen) firstFrame(i int) *image.RGBA {
	return procedural.Render(f.dc, procedural.NewScene(f.dc, f.data, f.split, i).At(f.dc, 0))
}

// embedding returns the cached CLIP image embedding of clip i's first frame.
func (f *frozen) embedding(i int) (*tensor.Dense, error) {
	if e, ok := f.emb[i]; ok {
		return e, nil
	}
	e, err := f.encodeEmbedding(f.clip, i)
	if err != nil {
		return nil, err
	}
	f.emb[i], f.cacheDirty = e, true
	return e, nil
}

// encodeEmbedding returns cm's image embedding of training clip i's first frame.
func (f *frozen) encodeEmbedding(cm *clip.Model, i int) (*tensor.Dense, error) {
	px, err := video.CLIPInput(f.firstFrame(i), f.ccfg.ImageSize, video.CLIPMean, video.CLIPStd)
	if err != nil {
		return nil, err
	}
	e, _, err := cm.Forward(px)
	return e, err
}

// ScalingFactor estimates the VAE scaling factor as 1/std of the latents of n clips.
func (f *frozen) scalingFactor(n int) (float64, error) {
	var s, s2, cnt float64
	for i := 0; i < n; i++ {
		l, err := f.rawLatents(i)
		if err != nil {
			return 0, err
		}
		for _, v := range l.Data {
			s += float64(v)
			s2 += float64(v) * float64(v)
			cnt++
		}
	}
	mean := s / cnt
	std := math.Sqrt(max(s2/cnt-mean*mean, 1e-12))
	return 1 / std, nil
}

type unetPhase struct {
	o    Options
	cfg  unet.Config
	vcfg vae.Config
	c    *context.Context
	from int
	fz   *frozen
}

func newUNetPhase(b backends.Backend, o Options, ucfg unet.Config, vcfg vae.Config, ccfg clip.Config) (*unetPhase, error) {
	fz, err := newFrozen(b, o.Dir, vcfg, ccfg, o.Seed, o.Data, o.Rule)
	if err != nil {
		return nil, err
	}
	ctx, from, md, err := openContext(o, func() (map[string]*tensor.Dense, error) { return UNetInitWeights(ucfg, o.Seed) })
	if err != nil {
		return nil, err
	}
	if v, ok := md["scaling_factor"]; ok {
		if fz.sf, err = strconv.ParseFloat(v, 64); err != nil {
			return nil, fmt.Errorf("%w: scaling_factor %q", ErrCheckpoint, v)
		}
	} else if fz.sf, err = fz.scalingFactor(min(32, o.Train)); err != nil {
		return nil, err
	}
	return &unetPhase{o: o, cfg: ucfg, vcfg: vcfg, c: ctx, from: from, fz: fz}, nil
}

func (p *unetPhase) ctx() *context.Context { return p.c }
func (p *unetPhase) step() int             { return p.from }
func (p *unetPhase) loss() lossFunc {
	return func(s nn.Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{unetLoss(s, p.cfg, in[0], in[1], in[2], in[3], in[4], in[5])}
	}
}
func (p *unetPhase) flush() error { return p.fz.saveLatentCache() }
func (p *unetPhase) meta() map[string]string {
	return map[string]string{"scaling_factor": strconv.FormatFloat(p.fz.sf, 'g', -1, 64)}
}

// ScalingFactor is the VAE scaling factor the phase trains with.
func (p *unetPhase) ScalingFactor() float64 { return p.fz.sf }

// examples draws the whole batch's random numbers in example order (every rank replays
// the draws of the examples it does not make) and builds only examples [lo, hi).
func (p *unetPhase) examples(k, lo, hi int) ([]*tensor.Dense, error) {
	r := rngFor(p.o, k)
	n, own := p.o.Batch, hi-lo
	dc := p.fz.dc
	f := p.vcfg.DownsampleFactor()
	c, h, w := p.vcfg.LatentChannels, dc.Height/f, dc.Width/f
	per := dc.Frames * c * h * w
	x0 := tensor.New(own, dc.Frames, c, h, w)
	sigma := tensor.New(own)
	img := tensor.New(own, 3, dc.Height, dc.Width)
	d := p.cfg.CrossAttentionDim[len(p.cfg.CrossAttentionDim)-1]
	ehs := tensor.New(own, 1, d)
	ids := tensor.New(own, 3)
	drop := make([]bool, own)
	imgPer := 3 * dc.Height * dc.Width
	for i := 0; i < n; i++ {
		idx := r.IntN(p.o.Train)
		sg := float32(math.Exp(p.o.PMean + p.o.PStd*r.NormFloat64()))
		dropped := r.Float64() < p.o.CondDropout
		if i < lo || i >= hi {
			for j := 0; j < imgPer; j++ {
				r.NormFloat64() // the noise augmentation of an example another rank makes
			}
			continue
		}
		e := i - lo
		l, err := p.fz.scaledLatents(idx)
		if err != nil {
			return nil, err
		}
		copy(x0.Data[e*per:(e+1)*per], l.Data)
		sigma.Data[e], drop[e] = sg, dropped
		frame0 := procedural.ToTensor([]*image.RGBA{p.fz.firstFrame(idx)})
		for j := 0; j < imgPer; j++ {
			img.Data[e*imgPer+j] = frame0.Data[j] + float32(p.o.NoiseAug)*float32(r.NormFloat64())
		}
		if !dropped {
			emb, err := p.fz.embedding(idx)
			if err != nil {
				return nil, err
			}
			copy(ehs.Data[e*d:(e+1)*d], emb.Data)
		}
		copy(ids.Data[3*e:], []float32{float32(p.o.FPS - 1), float32(p.o.Motion), float32(p.o.NoiseAug)})
	}
	noise := rows(normal(r, n, dc.Frames, c, h, w), lo, hi)
	post, err := p.fz.enc.Encode(img)
	if err != nil {
		return nil, err
	}
	lat := post.Mode()
	cp := c * h * w
	for e := 0; e < own; e++ {
		if drop[e] {
			clear(lat.Data[e*cp : (e+1)*cp])
		}
	}
	return []*tensor.Dense{x0, noise, sigma, lat, ehs, ids}, nil
}
