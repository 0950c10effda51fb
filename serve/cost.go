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
	queue, prepares, d := s.cfg.MaxQueue, s.cfg.MaxPrepares, s.gen.ServedDefaults()
	if s.coord != nil { // the coordinator's, defaults filled
		queue, prepares = s.coord.cfg.MaxQueue, s.coord.cfg.MaxPrepares
	}
	desc := s.gen.Description()
	out := job.ModelLimits{Input: input, Image: desc.ImageNeed().String(), LastImage: desc.LastImage.String(), NativeWidth: n.Width, NativeHeight: n.Height, NativeFrames: n.NumFrames, NativeSteps: n.Steps,
		MaxFrames: l.MaxFrames, MaxResolution: l.MaxResolution, MaxSteps: l.MaxSteps, CacheModes: desc.Caching.Modes,
		Knobs: job.Knobs(desc.Knobs, s.gen.ServedDefaults()), Inputs: desc.Inputs(), CostLimits: s.cost,
		MaxQueue: queue, MaxPrepares: prepares, Defaults: job.DefaultJob{Width: d.Width, Height: d.Height, NumFrames: d.NumFrames, Steps: d.Steps},
		DefaultsWhy: s.defaultsWhy, Schedulers: desc.SchedulerNames(), FlowShift: desc.FlowShift}
	if lm, ok := s.gen.(interface{ LoRAs() []string }); ok {
		out.LoRAs = lm.LoRAs()
	}
	return out
}

// imageSize reads an upload's header: a PNG or JPEG of at most maxPixels pixels (a
// refusal costs nothing), and its width and height.
func imageSize(data []byte, maxPixels int) (w, h int, err error) {
	cfg, err := imageConfig(data, maxPixels)
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

// checkImage verifies that data is an image job p's video can use (video.CheckAspect: not
// more than MaxAspectSkew times off its shape, so its prepare's cost is bounded by its
// pixels), a decodable PNG or JPEG of at most maxPixels pixels whose decoded memory
// (Cost.InputBytes) is within l (all checked from the header before decoding, so a
// decompression bomb or a 1048576x1 strip costs nothing; the pixels are then decoded
// within the process's decode memory budget). It returns the image's pixels.
func checkImage(data []byte, maxPixels int, l job.CostLimits, p job.Params) (int64, error) {
	cfg, err := imageConfig(data, maxPixels)
	if err != nil {
		return 0, err
	}
	if err := video.CheckAspect(cfg.Width, cfg.Height, p.Width, p.Height); err != nil {
		return 0, fmt.Errorf("%w: %w", job.ErrBadParams, err)
	}
	if err := l.Check(job.Cost{InputBytes: decodedBytes(cfg)}); err != nil {
		return 0, err
	}
	_, release, err := decodeImage(context.Background(), data, maxPixels)
	if err != nil {
		return 0, err
	}
	release()
	return int64(cfg.Width) * int64(cfg.Height), nil
}
