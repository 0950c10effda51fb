package serve

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn/backendspec"
	"github.com/vdpp/vdpp/serve/job"
)

// DefaultBudget is --default-budget's default: the predicted time a job that leaves its
// size, length and steps out may take on a CPU backend.
const DefaultBudget = 3 * time.Minute

// budgetFLOPs is the throughput a CPU backend is assumed to give a denoiser when the
// default job's time is predicted (a few cores of a current CPU; the stall watchdog's
// prior, FirstStepFLOPs, is one slow core).
const budgetFLOPs = 25e9

// fitDefaults returns the defaults a job that leaves its size, length and steps out gets
// on this server: the model's own (native) when a job of them fits, else the largest it
// finds that does, shrinking the length first (halved, down to a few frames: whole
// windows of a causal VAE), then the size (each side by a quarter, the aspect kept, in
// multiples of the model's size factor), then the steps; and why ("" when the native job
// fits). A job fits when why (nil: everything fits) says nothing against it. fitDefaults
// is pure.
func fitDefaults(native job.Params, desc family.Description, why func(job.Params) string) (job.Params, string) {
	first := why(native)
	if first == "" {
		return native, ""
	}
	p := native
	fm := max(desc.FrameMultiple, 1)
	snapFrames := func(n int) int { return 1 + (max(n, 1)-1)/fm*fm }
	minFrames := min(native.NumFrames, snapFrames(1+fm*max(1, 4/fm))) // a few frames: 5 (Wan: 1 + 4)
	m := max(desc.SizeMultiple, 1)
	snapSize := func(v int) int { return max(m, v/m*m) }
	for range 200 {
		if why(p) == "" {
			return p, fmt.Sprintf("the model's own %dx%d, %d frames, %d steps would not fit: %s", native.Width, native.Height, native.NumFrames, native.Steps, first)
		}
		switch {
		case p.NumFrames > minFrames:
			p.NumFrames = max(minFrames, snapFrames(p.NumFrames/2))
		case p.Width > m || p.Height > m:
			p.Width, p.Height = snapSize(p.Width*3/4), snapSize(p.Height*3/4)
		case p.Steps > 1:
			p.Steps = max(1, p.Steps/2)
		default:
			return native, "" // nothing smaller fits: the model's own (its refusal says why)
		}
	}
	return native, ""
}

// servedDefaults fits the served model's defaults to this server (fitDefaults): its cost
// limits (the machine's memory among them), its flag limits and, on a CPU backend, the
// time budget. It returns them and why they differ from the model's own ("" when not).
func (s *Server) servedDefaults(budget time.Duration) (job.Params, string) {
	if budget == 0 {
		budget = DefaultBudget
	}
	perUnit := s.gen.StepSecondsPerUnit() * FirstStepFLOPs / budgetFLOPs
	onCPU := onCPU(s.cfg.Spec.Backend)
	desc := s.gen.Description()
	why := func(p job.Params) string {
		if err := s.cost.Check(job.JobCost(p, s.gen.Activation())); err != nil {
			return strings.TrimPrefix(err.Error(), "serve: ")
		}
		if err := p.CheckLimits(s.cfg.Limits, desc.Knobs); err != nil {
			return strings.TrimPrefix(err.Error(), job.ErrTooLarge.Error()+": ")
		}
		if onCPU && budget > 0 && perUnit > 0 {
			secs := float64(p.Steps) * s.gen.StepWork(p) * perUnit
			if secs > budget.Seconds() {
				return fmt.Sprintf("its denoising would take about %s on this CPU backend (at an assumed %.0f GFLOP/s), over the --default-budget %s",
					roundDuration(secs), budgetFLOPs/1e9, budget)
			}
		}
		return ""
	}
	return fitDefaults(s.gen.DefaultParams(), desc, why)
}

// roundDuration writes seconds as a duration to a few figures ("42m", "3h10m").
func roundDuration(secs float64) string {
	d := time.Duration(math.Min(secs, 1e9) * float64(time.Second))
	switch {
	case d >= time.Hour:
		return d.Round(10 * time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// onCPU reports whether a backend spec runs on the CPU (simplego, or an XLA plugin that is
// not CUDA); a spec that does not resolve counts as the CPU.
func onCPU(backend string) bool {
	r, err := backendspec.Resolve(backend, backendspec.OSProbe())
	return err != nil || r.Kind == backendspec.KindGo || !r.CUDA
}
