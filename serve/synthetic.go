package serve

import (
	"context"
	"fmt"
	"image"
	"math"
	"math/rand/v2"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// SyntheticChannels is the latent channel count of the synthetic generator (SVD's 4).
const SyntheticChannels = 4

// noiseStream separates the server's noise stream from other PCG users of the same seed.
const noiseStream = 0x76647070 // "vdpp"

// Synthetic is the Generator of the synthetic model. Prepare draws the initial latent
// [1, T, 4, H/8, W/8] from N(0,1) with a PCG stream keyed by the seed, times
// init_noise_sigma, and conditions on the input image's mean colour (channels 0..2, in
// [-1, 1]) and on fps, motion bucket and noise augmentation (channel 3). Decode maps the
// first three latent channels through a sigmoid and upsamples them 8x (nearest), so a
// job's GIF shows its latent. Both are pure functions of their inputs.
type Synthetic struct{}

// Prepare implements Generator.
func (Synthetic) Prepare(_ context.Context, img image.Image, p Params, sc sched.Scheduler) (*Sample, error) {
	if img == nil {
		return nil, fmt.Errorf("serve: synthetic prepare: no image")
	}
	shape := append([]int{1}, p.LatentShape(SyntheticChannels)...)
	lat := tensor.New(shape...)
	r := rand.New(rand.NewPCG(uint64(p.Seed), noiseStream))
	for i := range lat.Data {
		lat.Data[i] = float32(r.NormFloat64()) * sc.InitSigma()
	}
	mean := meanColor(img)
	vec := tensor.New(SyntheticChannels)
	for c := 0; c < 3; c++ {
		vec.Data[c] = float32(mean[c])
	}
	vec.Data[3] = float32(p.NoiseAugStrength + float64(p.MotionBucketID)/255 + float64(p.FPS)/100)
	s := &Sample{Latent: lat, Cond: model.Conditioning{synthetic.CondKey: vec}}
	if p.Guided() {
		s.Guidance = sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), p.NumFrames)
	}
	// A long video: windows of the native length, each guided as a whole clip.
	if s.Windows = description(Synthetic{}).Windows(family.Params(p), nil); s.Windows != nil && p.Guided() {
		s.Windows.Guidance = sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), s.Windows.Size)
	}
	return s, nil
}

// meanColor returns the mean of each RGB channel scaled to [-1, 1], summed in a fixed order.
func meanColor(img image.Image) [3]float64 {
	b := img.Bounds()
	var sum [3]float64
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			sum[0] += float64(r)
			sum[1] += float64(g)
			sum[2] += float64(bl)
			n++
		}
	}
	var out [3]float64
	if n == 0 {
		return out
	}
	for c := range out {
		out[c] = sum[c]/float64(n)/65535*2 - 1
	}
	return out
}

// Decode implements Generator.
func (Synthetic) Decode(_ context.Context, latent *tensor.Dense, p Params) (*tensor.Dense, error) {
	s := latent.Shape
	if len(s) != 5 || s[0] != 1 || s[1] != p.NumFrames || s[3]*8 != p.Height || s[4]*8 != p.Width || s[2] < 1 {
		return nil, fmt.Errorf("serve: synthetic decode: latent %v does not fit %d frames of %dx%d", s, p.NumFrames, p.Width, p.Height)
	}
	t, c, lh, lw := s[1], s[2], s[3], s[4]
	out := tensor.New(t, 3, p.Height, p.Width)
	for f := 0; f < t; f++ {
		for ch := 0; ch < 3; ch++ {
			src := latent.Data[(f*c+ch%c)*lh*lw:]
			dst := out.Data[(f*3+ch)*p.Height*p.Width:]
			for y := 0; y < p.Height; y++ {
				for x := 0; x < p.Width; x++ {
					v := float64(src[(y/8)*lw+x/8])
					dst[y*p.Width+x] = float32(1 / (1 + math.Exp(-v)))
				}
			}
		}
	}
	return out, nil
}
