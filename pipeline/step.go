package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// HalfExchanger splits a guided step over a CFG-parallel pair of ranks: the rank with Index
// 0 evaluates the unconditional rows, Index 1 the conditional rows, and Exchange returns both
// halves on both ranks.
type HalfExchanger interface {
	Index() int
	Exchange(ctx context.Context, mine *tensor.Dense) (uncond, cond *tensor.Dense, err error)
}

// FrameSplit makes a step context parallel: this rank evaluates frames [Part.Lo, Part.Hi)
// (the model exchanges what its temporal layers need through Part.Comm) and Gather collects
// every member's output, in member order, so each rank ends the step with the whole sample.
type FrameSplit struct {
	Part   model.FramePart
	Gather func(ctx context.Context, mine *tensor.Dense) ([]*tensor.Dense, error)
}

// Stepper runs one denoising step on an item, exactly as SVD's loop does:
// scale_model_input, the model call (both CFG halves in one batch, unconditional rows first),
// the per-frame guidance combination, and the scheduler's update (which carries the
// scheduler's state in the item). With CFG or CP set, the model call
// is split over ranks and the pieces are gathered before the combination, so every rank
// computes the same bits as one rank alone would (for models whose rows and frames are
// computed independently; context-parallel models match within float tolerance). It reuses
// its buffers, so one Stepper serves one goroutine.
type Stepper struct {
	// Model is the denoiser of every step no expert covers.
	Model model.Denoiser
	// Experts, when set, picks the denoiser by step: a step inside an expert's Steps runs
	// that expert's model (a family with several denoisers by noise level, such as Wan
	// 2.2's high- and low-noise transformers). A rank sets only the experts its steps use.
	Experts []Expert
	// Sched is the scheduler; its per-item state travels in Item.SchedState.
	Sched sched.Scheduler
	// CFG, when set, splits guided steps over a CFG-parallel pair.
	CFG HalfExchanger
	// CP, when set, splits the frames over a context-parallel group.
	CP *FrameSplit
	// Joint, when set with both CFG and CP, replaces the two exchanges of a step (the
	// frames within the cp group, then the halves within the cfg pair) by one all-gather
	// over the cfg x cp group, in (cfg, cp) order: one synchronisation per step, not two.
	Joint func(ctx context.Context, mine *tensor.Dense) ([]*tensor.Dense, error)
	// Windows, when set, runs an item longer than Windows.Size frames as overlapping
	// temporal windows blended at every step (see Windows); items of at most Size frames
	// step exactly as without it. An item's own Item.Windows takes precedence.
	Windows *Windows
	// Observe, when set, sees every step's raw model output (both CFG halves) and the
	// guided output before the Euler step; parity checks use it. It must not keep the slices.
	Observe func(it *Item, step int, modelOut *tensor.Dense, guided []float32)
	// Updated, when set, sees the item after each step's scheduler update, before the last
	// step's model.LatentFinisher changes it; parity checks use it.
	Updated func(it *Item, step int)

	in *tensor.Dense // model input buffer
	v  []float32     // guided model output buffer
}

// Expert is one denoiser of a model that switches denoisers by step: it runs steps
// [Steps.Start, Steps.End).
type Expert struct {
	Steps Range
	Model model.Denoiser
	// ID names the expert the same way on every rank (Wan: 1 for transformer, 2 for
	// transformer_2); an item's step cache keeps each expert's states apart by it.
	ID int
	// Guidance, when set, replaces a guided item's per-frame guidance weights on this
	// expert's steps (Wan 2.2's guidance_scale_2 for the low-noise expert); it has one
	// weight per frame. Unguided items stay unguided.
	Guidance []float32
	// GuidanceRow is the row of an item's guidance weights this expert's steps use when the
	// item holds one row of per-frame weights per guidance scale ([E·T]: per-request
	// scales that travel with the item, as a Wan job's guidance_scale_2); an item with one
	// row ([T]) uses it on every step.
	GuidanceRow int
}

// ModelAt returns the denoiser of step k: the expert whose range holds k, else Model.
func (s *Stepper) ModelAt(k int) model.Denoiser {
	if e := s.expertAt(k); e != nil {
		return e.Model
	}
	return s.Model
}

func (s *Stepper) expertAt(k int) *Expert {
	for i := range s.Experts {
		if e := &s.Experts[i]; k >= e.Steps.Start && k < e.Steps.End {
			return e
		}
	}
	return nil
}

// guidanceAt returns the per-frame guidance weights of step k for it (nil when unguided):
// the expert's own weights when it has some, else the item's, or the expert's row of them
// when the item holds a row per guidance scale.
func (s *Stepper) guidanceAt(it *Item, k int) []float32 {
	e := s.expertAt(k)
	if e != nil && e.Guidance != nil && it.Guidance != nil {
		return e.Guidance
	}
	if frames := it.Latent.Shape[1]; e != nil && len(it.Guidance) > frames && len(it.Guidance)%frames == 0 && (e.GuidanceRow+1)*frames <= len(it.Guidance) {
		return it.Guidance[e.GuidanceRow*frames : (e.GuidanceRow+1)*frames]
	}
	return it.Guidance
}

// Step advances it by one step in place (it.Step is not changed; the Stage does that).
// After the schedule's last step, a denoiser of that step that is a model.LatentFinisher
// finishes each sample's latent.
func (s *Stepper) Step(ctx context.Context, it *Item) error {
	w := it.Windows
	if w == nil {
		w = s.Windows
	}
	var err error
	if w != nil && it.Latent != nil && len(it.Latent.Shape) == 5 && it.Latent.Shape[1] > w.Size {
		err = s.stepWindows(ctx, it, w)
	} else {
		err = s.stepOne(ctx, it)
	}
	if err != nil {
		return err
	}
	if s.Updated != nil {
		s.Updated(it, it.Step)
	}
	if it.Step == s.Sched.NumSteps()-1 {
		return s.finish(it)
	}
	return nil
}

// finish lets the last step's denoiser finish each sample's latent (model.LatentFinisher).
func (s *Stepper) finish(it *Item) error {
	f, ok := s.ModelAt(it.Step).(model.LatentFinisher)
	if !ok {
		return nil
	}
	rows := len(it.Samples)
	per := it.Latent.Len() / rows
	for r := range rows {
		var c model.Conditioning
		if r < len(it.Cond) {
			c = it.Cond[r]
		}
		lat := &tensor.Dense{Shape: it.Latent.Shape[1:], Data: it.Latent.Data[r*per : (r+1)*per]}
		if err := f.FinishLatent(c, lat); err != nil {
			return fmt.Errorf("pipeline: group %d: finishing sample %d: %w", it.Group, it.Samples[r], err)
		}
	}
	return nil
}

// stepOne advances it by one step over all its frames at once.
func (s *Stepper) stepOne(ctx context.Context, it *Item) error {
	v, err := s.guidedOutput(ctx, it, 0)
	if err != nil {
		return err
	}
	return s.update(it, v)
}

// guidedOutput runs the model call of step it.Step on all of it's frames and returns the
// guided model output the scheduler's update takes; win is the temporal window it is (its
// cache slots). The slice is valid until the next call.
func (s *Stepper) guidedOutput(ctx context.Context, it *Item, win int) ([]float32, error) {
	start := time.Now()
	k := it.Step
	x := it.Latent
	if len(x.Shape) != 5 || x.Shape[0] != len(it.Samples) {
		return nil, fmt.Errorf("pipeline: group %d: latent %v does not hold %d samples", it.Group, x.Shape, len(it.Samples))
	}
	if k < 0 || k >= s.Sched.NumSteps() {
		return nil, fmt.Errorf("pipeline: group %d: step %d outside the schedule's %d steps", it.Group, k, s.Sched.NumSteps())
	}
	den := s.ModelAt(k)
	if den == nil {
		return nil, fmt.Errorf("pipeline: group %d: no denoiser loaded for step %d", it.Group, k)
	}
	rows, n, frames := x.Shape[0], x.Len(), x.Shape[1]
	weights := s.guidanceAt(it, k)
	guided := weights != nil
	if guided && len(weights) != frames {
		return nil, fmt.Errorf("pipeline: group %d step %d: %d guidance weights for %d frames", it.Group, k, len(weights), frames)
	}
	if s.CFG != nil && !guided {
		return nil, fmt.Errorf("pipeline: group %d: CFG-parallel ranks need a guided run", it.Group)
	}

	// The rows this rank evaluates: both halves [uncond..., cond...] when guided on one
	// rank, one half with CFG parallelism, the plain rows otherwise.
	inRows := rows
	if guided && s.CFG == nil {
		inRows = 2 * rows
	}
	s.ensureInput(inRows, x.Shape)
	if err := s.Sched.ScaleModelInput(s.in.Data[:n], x.Data, k); err != nil {
		return nil, fmt.Errorf("pipeline: group %d: %w", it.Group, err)
	}
	conds := make([]model.Conditioning, inRows)
	uncond := make([]bool, inRows)
	for r := 0; r < rows; r++ {
		if it.Cond != nil {
			conds[r] = it.Cond[r]
		}
	}
	switch {
	case guided && s.CFG == nil:
		copy(s.in.Data[n:2*n], s.in.Data[:n])
		copy(conds[rows:], conds[:rows])
		for r := 0; r < rows; r++ {
			uncond[r] = true
		}
	case guided:
		for r := 0; r < rows; r++ {
			uncond[r] = s.CFG.Index() == 0
		}
	}
	in := model.Input{Latents: s.in, Sigma: s.Sched.Sigma(k), Timestep: s.Sched.Timestep(k), Step: k, FirstFrame: it.firstFrame, Cond: conds, Uncond: uncond}
	cc := s.cacheCall(it, k, win, inRows, guided)
	var call *model.CacheCall
	if cc != nil {
		call = cc.call
	}
	out, work, comm, err := s.predict(ctx, den, in, call)
	if err != nil {
		return nil, fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
	}
	if s.CFG != nil {
		t0 := time.Now()
		u, c, err := s.exchangeHalves(ctx, out, x.Shape)
		comm += time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("pipeline: group %d step %d: cfg exchange: %w", it.Group, k, err)
		}
		if u.Len() != n || c.Len() != n {
			return nil, fmt.Errorf("pipeline: group %d step %d: cfg halves %v %v for latent %v", it.Group, k, u.Shape, c.Shape, x.Shape)
		}
		both := tensor.New(append([]int{2 * rows}, x.Shape[1:]...)...)
		copy(both.Data[:n], u.Data)
		copy(both.Data[n:], c.Data)
		out = both
	}
	if cc != nil {
		t0 := time.Now()
		err := cc.finish(ctx, s, it, k, win, guided, in.Latents)
		comm += time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
		}
	}
	if want := map[bool]int{true: 2 * n, false: n}[guided]; out.Len() != want {
		return nil, fmt.Errorf("pipeline: group %d step %d: denoiser returned %v for latent %v", it.Group, k, out.Shape, x.Shape)
	}
	v := out.Data
	if guided {
		if cap(s.v) < n {
			s.v = make([]float32, n)
		}
		v = s.v[:n]
		per := n / rows
		for r := 0; r < rows; r++ {
			lo, hi := r*per, (r+1)*per
			if err := sched.CFGCombine(v[lo:hi], out.Data[lo:hi], out.Data[n+lo:n+hi], weights, per/frames); err != nil {
				return nil, fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
			}
		}
	}
	if s.Observe != nil {
		s.Observe(it, k, out, v)
	}
	if p, ok := den.(model.Paced); ok {
		// The simulated compute budget excludes the time spent in exchanges: a real model
		// pays collectives on top of its compute, so the simulator must too.
		p.Pace(start.Add(comm), work)
	}
	return v, nil
}

// update runs the scheduler's update of step it.Step on it's latent with the guided model
// output v, carrying the scheduler's state.
func (s *Stepper) update(it *Item, v []float32) error {
	k, x := it.Step, it.Latent
	if err := it.SchedState.Check(x.Len()); err != nil {
		return fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
	}
	next, err := s.Sched.Update(x.Data, v, x.Data, k, it.SchedState)
	if err != nil {
		return fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
	}
	it.SchedState = next
	return nil
}

// exchangeHalves returns both CFG halves of a step's model output, whole in frames: through
// the joint cfg x cp all-gather when set (mine holds this rank's frames only), else through
// the cfg pair (mine holds every frame).
func (s *Stepper) exchangeHalves(ctx context.Context, mine *tensor.Dense, latent []int) (u, c *tensor.Dense, err error) {
	if s.Joint == nil || s.CP == nil {
		return s.CFG.Exchange(ctx, mine)
	}
	parts, err := s.Joint(ctx, mine)
	if err != nil {
		return nil, nil, err
	}
	if len(parts)%2 != 0 {
		return nil, nil, fmt.Errorf("pipeline: joint cfg x cp exchange returned %d parts", len(parts))
	}
	half := len(parts) / 2
	if u, err = concatFrames(parts[:half], latent); err != nil {
		return nil, nil, err
	}
	if c, err = concatFrames(parts[half:], latent); err != nil {
		return nil, nil, err
	}
	return u, c, nil
}

// predict runs the model on in, over this rank's frames when context parallel, and returns
// the whole output, the work done here in full-sample rows and the time spent gathering.
func (s *Stepper) predict(ctx context.Context, den model.Denoiser, in model.Input, cc *model.CacheCall) (*tensor.Dense, float64, time.Duration, error) {
	rows := float64(in.Rows())
	if s.CP == nil {
		if cc != nil {
			out, work, err := s.predictCached(ctx, den, in, cc)
			return out, work, 0, err
		}
		out, err := den.Predict(ctx, in)
		return out, rows, 0, err
	}
	p := s.CP.Part
	var mine *tensor.Dense
	var work float64
	var err error
	if cc != nil {
		mine, work, err = s.predictCached(ctx, den, in, cc)
	} else {
		cpm, ok := den.(model.ContextParallel)
		if !ok {
			return nil, 0, 0, fmt.Errorf("pipeline: the model (%T) does not support context parallelism", den)
		}
		local := in
		local.Latents = sliceFrames(in.Latents, p.Lo, p.Hi)
		mine, err = cpm.PredictFrames(ctx, local, p)
		work = rows * float64(p.Hi-p.Lo) / float64(p.Total)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	if s.Joint != nil && s.CFG != nil {
		return mine, work, 0, nil // frames and halves are gathered together in Step
	}
	t0 := time.Now()
	parts, err := s.CP.Gather(ctx, mine)
	comm := time.Since(t0)
	if err != nil {
		return nil, 0, comm, fmt.Errorf("cp gather: %w", err)
	}
	out, err := concatFrames(parts, in.Latents.Shape)
	return out, work, comm, err
}

// sliceFrames copies frames [lo, hi) of x [N, T, ...] into a new [N, hi-lo, ...] tensor.
func sliceFrames(x *tensor.Dense, lo, hi int) *tensor.Dense {
	n, t := x.Shape[0], x.Shape[1]
	per := x.Len() / (n * t)
	out := tensor.New(append([]int{n, hi - lo}, x.Shape[2:]...)...)
	for r := 0; r < n; r++ {
		copy(out.Data[r*(hi-lo)*per:(r+1)*(hi-lo)*per], x.Data[(r*t+lo)*per:(r*t+hi)*per])
	}
	return out
}

// concatFrames joins per-member frame slices [N, t_i, ...] into [N, sum t_i, ...] = shape.
func concatFrames(parts []*tensor.Dense, shape []int) (*tensor.Dense, error) {
	n, t := shape[0], shape[1]
	out := tensor.New(shape...)
	per := out.Len() / (n * t)
	f := 0
	for i, p := range parts {
		if len(p.Shape) != len(shape) || p.Shape[0] != n {
			return nil, fmt.Errorf("pipeline: cp member %d returned %v for rows of %v", i, p.Shape, shape)
		}
		ti := p.Shape[1]
		if f+ti > t || p.Len() != n*ti*per {
			return nil, fmt.Errorf("pipeline: cp member %d returned %v; frames do not add up to %v", i, p.Shape, shape)
		}
		for r := 0; r < n; r++ {
			copy(out.Data[(r*t+f)*per:(r*t+f+ti)*per], p.Data[r*ti*per:(r+1)*ti*per])
		}
		f += ti
	}
	if f != t {
		return nil, fmt.Errorf("pipeline: cp members returned %d of %d frames", f, t)
	}
	return out, nil
}

// FrameRanges cuts t frames over c ranks: contiguous ranges whose sizes differ by at most one
// (larger first), so frame counts not divisible by c work.
func FrameRanges(t, c int) ([]Range, error) {
	if c < 1 || t < c {
		return nil, fmt.Errorf("pipeline: %d frames cannot be split over %d context-parallel ranks", t, c)
	}
	return EvenStages(t, c)
}

func (s *Stepper) ensureInput(rows int, shape []int) {
	want := append([]int{rows}, shape[1:]...)
	if s.in != nil && len(s.in.Shape) == len(want) {
		same := true
		for i := range want {
			same = same && s.in.Shape[i] == want[i]
		}
		if same {
			return
		}
	}
	s.in = tensor.New(want...)
}

func modelFramePart(r Range, total int, comm model.FrameComm) model.FramePart {
	return model.FramePart{Lo: r.Start, Hi: r.End, Total: total, Comm: comm}
}
