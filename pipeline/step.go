package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Stepper runs one denoising step on an item, exactly as SVD's loop does:
// scale_model_input, the model call (both CFG halves in one batch, unconditional rows first),
// the per-frame guidance combination, and the Euler step. It reuses its buffers, so one
// Stepper serves one goroutine.
type Stepper struct {
	Model model.Denoiser
	Sched *sched.Euler
	// Observe, when set, sees every step's raw model output (both CFG halves) and the
	// guided output before the Euler step; parity checks use it. It must not keep the slices.
	Observe func(it *Item, step int, modelOut *tensor.Dense, guided []float32)

	in *tensor.Dense // model input buffer
	v  []float32     // guided model output buffer
}

// Step advances it by one step in place (it.Step is not changed; the Stage does that).
func (s *Stepper) Step(ctx context.Context, it *Item) error {
	start := time.Now()
	k := it.Step
	x := it.Latent
	if len(x.Shape) != 5 || x.Shape[0] != len(it.Samples) {
		return fmt.Errorf("pipeline: group %d: latent %v does not hold %d samples", it.Group, x.Shape, len(it.Samples))
	}
	if k < 0 || k >= len(s.Sched.Timesteps) {
		return fmt.Errorf("pipeline: group %d: step %d outside the schedule's %d steps", it.Group, k, len(s.Sched.Timesteps))
	}
	rows, n := x.Shape[0], x.Len()
	guided := it.Guidance != nil
	frames := x.Shape[1]
	if guided && len(it.Guidance) != frames {
		return fmt.Errorf("pipeline: group %d: %d guidance weights for %d frames", it.Group, len(it.Guidance), frames)
	}
	inRows := rows
	if guided {
		inRows = 2 * rows
	}
	s.ensureInput(inRows, x.Shape)
	if err := s.Sched.ScaleModelInput(s.in.Data[:n], x.Data, k); err != nil {
		return fmt.Errorf("pipeline: group %d: %w", it.Group, err)
	}
	conds := make([]model.Conditioning, inRows)
	uncond := make([]bool, inRows)
	for r := 0; r < rows; r++ {
		if it.Cond != nil {
			conds[r] = it.Cond[r]
		}
	}
	if guided {
		copy(s.in.Data[n:2*n], s.in.Data[:n])
		copy(conds[rows:], conds[:rows])
		for r := 0; r < rows; r++ {
			uncond[r] = true
		}
	}
	out, err := s.Model.Predict(ctx, model.Input{
		Latents:  s.in,
		Sigma:    s.Sched.Sigmas[k],
		Timestep: s.Sched.Timesteps[k],
		Step:     k,
		Cond:     conds,
		Uncond:   uncond,
	})
	if err != nil {
		return fmt.Errorf("pipeline: group %d step %d: denoiser: %w", it.Group, k, err)
	}
	if out.Len() != s.in.Len() {
		return fmt.Errorf("pipeline: group %d step %d: denoiser returned %v for input %v", it.Group, k, out.Shape, s.in.Shape)
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
			if err := sched.CFGCombine(v[lo:hi], out.Data[lo:hi], out.Data[n+lo:n+hi], it.Guidance, per/frames); err != nil {
				return fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
			}
		}
	}
	if s.Observe != nil {
		s.Observe(it, k, out, v)
	}
	if err := s.Sched.Step(x.Data, v, x.Data, k); err != nil {
		return fmt.Errorf("pipeline: group %d step %d: %w", it.Group, k, err)
	}
	if p, ok := s.Model.(model.Paced); ok {
		p.Pace(start, inRows)
	}
	return nil
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
