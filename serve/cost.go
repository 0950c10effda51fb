package serve

import (
	"context"

	"github.com/vdpp/vdpp/serve/job"
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
	queue, prepares := s.cfg.MaxQueue, s.cfg.MaxPrepares
	if s.coord != nil { // the coordinator's, defaults filled
		queue, prepares = s.coord.cfg.MaxQueue, s.coord.cfg.MaxPrepares
	}
	return job.ModelLimits{Input: input, NativeWidth: n.Width, NativeHeight: n.Height, NativeFrames: n.NumFrames, NativeSteps: n.Steps,
		MaxFrames: l.MaxFrames, MaxResolution: l.MaxResolution, MaxSteps: l.MaxSteps, CacheModes: s.gen.Description().Caching.Modes,
		Knobs: job.Knobs(s.gen.Description().Knobs, s.gen.DefaultParams()), CostLimits: s.cost,
		MaxQueue: queue, MaxPrepares: prepares}
}

// checkImage verifies that data is a decodable PNG or JPEG of at most maxPixels pixels
// whose decoded memory (Cost.InputBytes) is within l (both checked from the header before
// decoding, so a decompression bomb costs nothing; the pixels are decoded within the
// process's decode memory budget), and returns its width and height (the job's video must
// be able to use its shape: video.CheckAspect, once the job's size is known).
func checkImage(data []byte, maxPixels int, l job.CostLimits) (w, h int, err error) {
	cfg, err := imageConfig(data, maxPixels)
	if err != nil {
		return 0, 0, err
	}
	if err := l.Check(job.Cost{InputBytes: decodedBytes(cfg)}); err != nil {
		return 0, 0, err
	}
	_, release, err := decodeImage(context.Background(), data, maxPixels)
	if err != nil {
		return 0, 0, err
	}
	release()
	return cfg.Width, cfg.Height, nil
}
