package generate

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/vdpp/vdpp/eval"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
)

// UncachedDir is the folder under --out where --cache-check writes the uncached run.
const UncachedDir = "uncached"

// CheckHint follows the cache line's latent change: how to measure the quality instead.
const CheckHint = "--cache-check measures PSNR/SSIM"

// reuseFraction is a reusing call's cost as a fraction of a computing one's under p's cache
// rule (the family's cost model, from the configs alone).
func reuseFraction(m family.Resolved, p family.Params) (float64, error) {
	latent, err := m.LatentShape(p)
	if err != nil {
		return 0, err
	}
	cost, err := m.CacheCost(p.Cache, latent)
	if err != nil {
		return 0, err
	}
	return cost.ReuseFraction, nil
}

// readReport reads a sample folder's report.json.
func readReport(dir string) (SampleReport, error) {
	var rep SampleReport
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return rep, fmt.Errorf("generate: %w", err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("generate: %s: %w", filepath.Join(dir, "report.json"), err)
	}
	return rep, nil
}

// writeReport rewrites a sample folder's report.json.
func writeReport(dir string, rep SampleReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), atomicfile.Options{})
}

// reportCache prints the cached run's one line (pipeline.CacheOutcome.Line) for the
// finished samples dirs of the run of options o (given: as the user gave them); with
// --cache-check it first runs the job again without the cache under OUT/uncached, scores
// each sample's frames against the uncached ones and adds the comparison to its
// report.json.
func (r *Runner) reportCache(ctx context.Context, given, o Options, dirs []string, say io.Writer) error {
	m, err := family.Resolve(o.Model)
	if err != nil {
		return err
	}
	p := params(o)
	if p.Cache, err = m.ResolveCache(p.Cache, o.Steps); err != nil {
		return err
	}
	reuse, err := reuseFraction(m, p)
	if err != nil {
		return err
	}
	out := pipeline.CacheOutcome{Steps: o.Steps, ReuseFraction: reuse, CheckHint: CheckHint}
	reps := make([]SampleReport, len(dirs))
	for i, d := range dirs {
		if reps[i], err = readReport(d); err != nil {
			return err
		}
		if reps[i].Cache == nil {
			return fmt.Errorf("generate: %s has no cache record", filepath.Join(d, "report.json"))
		}
		out.Samples = append(out.Samples, *reps[i].Cache)
		out.DenoiseMS += reps[i].Timings.DiffusionMS
	}
	if o.CacheCheck {
		fmt.Fprintf(say, "generate: --cache-check: the same job without the cache, in %s\n", filepath.Join(o.Out, UncachedDir))
		// The options as given (the defaults filled again), on the mesh the cached run used.
		u := given
		u.Given = knob.Given{}
		for name, on := range given.Given {
			if k, ok := family.AllKnobs().Lookup(name); !ok || k.Group != knob.Cache {
				u.Given[name] = on
			}
		}
		u.Cache, u.CacheCheck, u.Out, u.Quiet, u.ProgressDir = pipeline.Cache{}, false, filepath.Join(o.Out, UncachedDir), true, ""
		u.NProc, u.PP, u.CFG, u.CP, u.DP, u.Plan = o.NProc, o.PP, o.CFG, o.CP, o.DP, ""
		udirs, err := r.Run(ctx, u)
		if err != nil {
			return fmt.Errorf("generate: --cache-check: the uncached run: %w", err)
		}
		if len(udirs) != len(dirs) {
			return fmt.Errorf("generate: --cache-check: the uncached run made %d samples, the cached one %d", len(udirs), len(dirs))
		}
		var psnr, ssim float64
		for i, d := range dirs {
			urep, err := readReport(udirs[i])
			if err != nil {
				return err
			}
			c := pipeline.CacheCheck{UncachedMS: urep.Timings.DiffusionMS, CachedMS: reps[i].Timings.DiffusionMS}
			if c.PSNR, c.SSIM, err = compareFrames(filepath.Join(d, "frames"), filepath.Join(udirs[i], "frames")); err != nil {
				return fmt.Errorf("generate: --cache-check: %w", err)
			}
			psnr, ssim = psnr+c.PSNR, ssim+c.SSIM
			out.UncachedMS += c.UncachedMS
			one := pipeline.CacheOutcome{Samples: []pipeline.CacheSummary{*reps[i].Cache}, Steps: o.Steps, DenoiseMS: c.CachedMS,
				UncachedMS: c.UncachedMS, ReuseFraction: reuse, PSNR: c.PSNR, SSIM: c.SSIM}
			reps[i].Cache.Check = &c
			reps[i].Cache.Summary = one.Line()
			if err := writeReport(d, reps[i]); err != nil {
				return err
			}
		}
		out.PSNR, out.SSIM = psnr/float64(len(dirs)), ssim/float64(len(dirs))
	}
	fmt.Fprintln(say, "generate: "+out.Line())
	return nil
}

// compareFrames scores the PNG frames of dir against those of ref, frame by frame: PSNR
// over all pixels and SSIM averaged over the frames.
func compareFrames(dir, ref string) (psnr, ssim float64, err error) {
	names, err := filepath.Glob(filepath.Join(ref, "*.png"))
	if err != nil || len(names) == 0 {
		return 0, 0, fmt.Errorf("no frames in %s", ref)
	}
	sort.Strings(names)
	var all, allRef []float32
	for _, n := range names {
		b, h, w, err := readFrame(filepath.Join(dir, filepath.Base(n)))
		if err != nil {
			return 0, 0, err
		}
		a, rh, rw, err := readFrame(n)
		if err != nil {
			return 0, 0, err
		}
		if h != rh || w != rw {
			return 0, 0, fmt.Errorf("%s is %dx%d, %s %dx%d", filepath.Join(dir, filepath.Base(n)), w, h, n, rw, rh)
		}
		s, err := eval.SSIM(b, a, 3, h, w)
		if err != nil {
			return 0, 0, err
		}
		ssim += s
		all, allRef = append(all, b...), append(allRef, a...)
	}
	psnr, err = eval.PSNR(all, allRef)
	return psnr, ssim / float64(len(names)), err
}

// readFrame decodes a PNG as [3, H, W] values in [0, 1].
func readFrame(path string) ([]float32, int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return planar(img)
}

// planar is an image's RGB as [3, H, W] in [0, 1].
func planar(img image.Image) ([]float32, int, int, error) {
	b := img.Bounds()
	h, w := b.Dy(), b.Dx()
	out := make([]float32, 3*h*w)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			i := y*w + x
			out[i], out[h*w+i], out[2*h*w+i] = float32(r)/65535, float32(g)/65535, float32(bl)/65535
		}
	}
	return out, h, w, nil
}
