package serve

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/video"
)

// modelCostLimits returns gen's limits: DeriveCostLimits of gen's defaults and step
// memory estimate with multiple (0: DefaultCostMultiple; negative: none), MaxPixels
// replaced when maxPixels > 0.
func modelCostLimits(gen generator, multiple float64, maxPixels int64) job.CostLimits {
	if multiple == 0 {
		multiple = job.DefaultCostMultiple
	}
	l := job.DeriveCostLimits(gen.DefaultParams(), gen.Activation(), multiple)
	if maxPixels > 0 {
		l.MaxPixels = maxPixels
	}
	return l
}

// checkCost refuses (a *CostError) a job with p that the served model cannot run within
// its cost limits.
func (s *Server) checkCost(p job.Params) error {
	return s.cost.Check(job.JobCost(p, s.gen.Activation()))
}

func (s *Server) modelLimits() job.ModelLimits {
	n, l := s.cost.Native, s.cfg.Limits
	input := job.InputImage
	if s.gen.TextConditioned() {
		input = job.InputText
	}
	return job.ModelLimits{Input: input, NativeWidth: n.Width, NativeHeight: n.Height, NativeFrames: n.NumFrames, NativeSteps: n.Steps,
		MaxFrames: l.MaxFrames, MaxResolution: l.MaxResolution, MaxSteps: l.MaxSteps, CacheModes: s.gen.Description().Caching.Modes,
		Knobs: job.Knobs(s.gen.Description().Knobs, s.gen.DefaultParams()), CostLimits: s.cost}
}

// checkImage verifies that data is a decodable PNG or JPEG of at most maxPixels pixels
// whose decoded memory (Cost.InputBytes) is within l and whose aspect ratio the job p's
// video can use (video.CheckAspect; all checked from the header before decoding, so a
// decompression bomb or a 1048576x1 strip costs nothing; the pixels are decoded within the
// process's decode memory budget).
func checkImage(data []byte, maxPixels int, l job.CostLimits, p job.Params) error {
	cfg, err := imageConfig(data, maxPixels)
	if err != nil {
		return err
	}
	if err := video.CheckAspect(cfg.Width, cfg.Height, p.Width, p.Height); err != nil {
		return fmt.Errorf("%w: %w", job.ErrBadParams, err)
	}
	if err := l.Check(job.Cost{InputBytes: decodedBytes(cfg)}); err != nil {
		return err
	}
	_, release, err := decodeImage(context.Background(), data, maxPixels)
	if err == nil {
		release()
	}
	return err
}
