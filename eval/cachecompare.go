package eval

import (
	"context"
	"fmt"
	"math"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// Prompts are the prompts `vdpp eval --cache` gives a text-to-video model, in order (the
// n-th video takes Prompts[n mod len] and the noise of sample n).
var Prompts = []string{
	"A red fox runs through the snow at dawn",
	"Two cats play in a sunny garden",
	"A slow camera pan over a mountain lake at night",
	"A cyclist rides down a wet city street in the rain",
	"Waves break on a rocky shore, wide shot",
	"A bird flies over a green forest, close up",
	"People dance in a street with lights at night",
	"A car drives along a river road, cinematic",
}

// CacheClip is one video's comparison of its cached generation with its uncached one.
type CacheClip struct {
	Index  int     `json:"index"`
	Prompt string  `json:"prompt,omitempty"`
	PSNR   float64 `json:"psnr"`
	SSIM   float64 `json:"ssim"`
}

// CacheComparison is a step cache's cost on a model with no ground truth to score against
// (a text-to-video model): every video generated with the cache and without it, the cached
// videos scored against the uncached ones (PSNR over all frames, SSIM averaged over
// frames), the calls computed and both denoising times.
type CacheComparison struct {
	Rule      string       `json:"rule"`
	Clips     []CacheClip  `json:"clips"`
	PSNR      float64      `json:"psnr"`
	SSIM      float64      `json:"ssim"`
	WorstPSNR float64      `json:"worst_psnr"`
	WorstSSIM float64      `json:"worst_ssim"`
	Cache     *CacheReport `json:"cache"`
	// Line is the cache's one line (pipeline.CacheOutcome.Line) with the measured time
	// and quality.
	Line string `json:"summary"`
	// Cached and Uncached are what the generations did.
	Cached, Uncached Stats `json:"-"`
}

// CompareCache generates inputs[i] (sample i) with pr.Cache (resolve it first with
// family.Resolved.ResolveCache) and right after without it, interleaved so the two timings
// see the same load, and scores each cached video against its uncached twin. progress,
// when set, is called after each video.
func CompareCache(ctx context.Context, s family.Sampler, inputs []family.Input, pr family.Params, progress func(i int)) (CacheComparison, error) {
	if !pr.Cache.On() {
		return CacheComparison{}, fmt.Errorf("eval: compare cache: no cache rule")
	}
	plain := pr
	plain.Cache = pipeline.Cache{}
	c := CacheComparison{Rule: pr.Cache.String(), WorstPSNR: math.Inf(1), WorstSSIM: math.Inf(1)}
	for i, in := range inputs {
		cached, st, err := GenerateInput(ctx, s, in, pr, int64(i))
		if err != nil {
			return c, err
		}
		c.Cached.Add(st)
		ref, st, err := GenerateInput(ctx, s, in, plain, int64(i))
		if err != nil {
			return c, err
		}
		c.Uncached.Add(st)
		clip := CacheClip{Index: i}
		if in.Prompt != nil {
			clip.Prompt = in.Prompt.Text
		}
		if clip.PSNR, clip.SSIM, err = videoScores(cached, ref); err != nil {
			return c, err
		}
		c.Clips = append(c.Clips, clip)
		c.PSNR += clip.PSNR / float64(len(inputs))
		c.SSIM += clip.SSIM / float64(len(inputs))
		c.WorstPSNR, c.WorstSSIM = min(c.WorstPSNR, clip.PSNR), min(c.WorstSSIM, clip.SSIM)
		if progress != nil {
			progress(i)
		}
	}
	c.Cache = NewCacheReport(c.Rule, c.Cached, c.Uncached)
	c.Line = pipeline.CacheOutcome{Samples: c.Cached.Caches, Steps: pr.Steps, DenoiseMS: msOf(c.Cached),
		UncachedMS: msOf(c.Uncached), PSNR: c.PSNR, SSIM: c.SSIM}.Line()
	return c, nil
}

func msOf(s Stats) float64 { return float64(s.Diffusion.Microseconds()) / 1e3 }

// videoScores is PSNR over all frames and SSIM averaged over frames of video a against ref,
// both [T, 3, H, W] in [0, 1].
func videoScores(a, ref *tensor.Dense) (psnr, ssim float64, err error) {
	if len(a.Shape) != 4 || !equalShape(a.Shape, ref.Shape) {
		return 0, 0, fmt.Errorf("eval: videos %v and %v", a.Shape, ref.Shape)
	}
	t, c, h, w := a.Shape[0], a.Shape[1], a.Shape[2], a.Shape[3]
	if psnr, err = PSNR(a.Data, ref.Data); err != nil {
		return 0, 0, err
	}
	per := c * h * w
	for f := range t {
		s, err := SSIM(a.Data[f*per:(f+1)*per], ref.Data[f*per:(f+1)*per], c, h, w)
		if err != nil {
			return 0, 0, err
		}
		ssim += s / float64(t)
	}
	return psnr, ssim, nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
