package sched

import (
	"fmt"
	"math"
	"slices"
)

// UniPC is diffusers' UniPCMultistepScheduler (v0.35.2) after set_timesteps: the immutable
// schedule plus the solver rules. It is safe for concurrent use. Everything that changes
// from step to step (the model-output history, the last sample, the orders, the step index)
// lives in a UniPCState the caller owns and passes to Step, so a run can be cut between any
// two steps, the state serialised (UniPCState.MarshalBinary or Tensors), and resumed in
// another process with bit-identical results.
//
// Step mirrors the reference's float32 operation order on flat []float32 latents: every
// tensor operation rounds like torch's CPU kernels, and the scalar coefficients are
// float32 like diffusers' 0-dim tensors, with torch's own log and expm1 (SLEEF's) and the
// reference LAPACK's order of operations in the small linear solves. On the reference
// cases the results are bit-identical to diffusers on torch 1.13 CPU.
type UniPC struct {
	cfg       UniPCConfig
	timesteps []int64
	sigmas    []float32
}

// NewUniPC validates cfg and computes the schedule for numSteps inference steps. It fails
// for use_dynamic_shifting configs, which need NewUniPCShifted.
func NewUniPC(cfg UniPCConfig, numSteps int) (*UniPC, error) {
	return NewUniPCShifted(cfg, numSteps, math.NaN())
}

// NewUniPCShifted is NewUniPC with set_timesteps' mu: with use_dynamic_shifting the flow
// shift becomes e^mu (mu must then be a number; otherwise NaN).
func NewUniPCShifted(cfg UniPCConfig, numSteps int, mu float64) (*UniPC, error) {
	ts, sig, err := UniPCSchedule(cfg, numSteps, mu)
	if err != nil {
		return nil, err
	}
	return &UniPC{cfg: cfg, timesteps: ts, sigmas: sig}, nil
}

// Config returns the configuration the schedule was built from.
func (u *UniPC) Config() UniPCConfig { return u.cfg }

// NumSteps returns the number of denoising steps (len(Timesteps())).
func (u *UniPC) NumSteps() int { return len(u.timesteps) }

// Timesteps returns the model timesteps as float32 (they are integers, exact in float32).
func (u *UniPC) Timesteps() []float32 {
	out := make([]float32, len(u.timesteps))
	for i, t := range u.timesteps {
		out[i] = float32(t)
	}
	return out
}

// TimestepsInt64 returns the model timesteps as diffusers holds them (torch.int64).
func (u *UniPC) TimestepsInt64() []int64 { return slices.Clone(u.timesteps) }

// Sigmas returns the NumSteps()+1 float32 sigmas; the last is the final sigma.
func (u *UniPC) Sigmas() []float32 { return slices.Clone(u.sigmas) }

// NewState returns the state before the first step: empty history and an unset step
// index, which the first Step derives from its timestep like diffusers' _init_step_index.
func (u *UniPC) NewState() *UniPCState {
	st := &UniPCState{StepIndex: -1, ModelOutputs: make([][]float32, u.cfg.SolverOrder), HistoryTimesteps: make([]float32, u.cfg.SolverOrder)}
	for i := range st.HistoryTimesteps {
		st.HistoryTimesteps[i] = float32(math.NaN())
	}
	return st
}

// indexForTimestep is diffusers' index_for_timestep: the position of t in the schedule,
// the second one if t occurs twice, the last step if it does not occur.
func (u *UniPC) indexForTimestep(t float32) int {
	var hits []int
	for i, s := range u.timesteps {
		if float64(s) == float64(t) {
			hits = append(hits, i)
		}
	}
	switch {
	case len(hits) == 0:
		return len(u.timesteps) - 1
	case len(hits) > 1:
		return hits[1]
	}
	return hits[0]
}

// Step advances st by one step: it converts modelOutput (the denoiser's output at sample
// and timestep t) to the solver's prediction, applies the UniC corrector to sample when
// the state holds a previous step, records the history, and returns the UniP predictor's
// sample for the next timestep as a new slice. t only matters on the first step of a
// fresh state (it selects the step index); afterwards the state's index is used, as in
// diffusers. modelOutput and sample are not modified or retained.
func (u *UniPC) Step(st *UniPCState, modelOutput []float32, t float32, sample []float32) ([]float32, error) {
	if err := u.checkState(st, len(sample)); err != nil {
		return nil, err
	}
	if len(modelOutput) != len(sample) {
		return nil, fmt.Errorf("sched: UniPC step: model output has %d values, sample %d", len(modelOutput), len(sample))
	}
	if st.StepIndex < 0 {
		st.StepIndex = u.indexForTimestep(t)
	}
	idx := st.StepIndex
	if idx >= len(u.timesteps) {
		return nil, fmt.Errorf("sched: UniPC step index %d is past the last of %d steps", idx, len(u.timesteps))
	}
	order := u.cfg.SolverOrder
	useCorrector := idx > 0 && !slices.Contains(u.cfg.DisableCorrector, idx-1) && st.LastSample != nil
	x0 := u.convertModelOutput(modelOutput, sample, idx)
	if useCorrector {
		sample = u.corrector(st, x0, sample, idx)
	} else {
		sample = slices.Clone(sample)
	}
	copy(st.ModelOutputs, st.ModelOutputs[1:])
	copy(st.HistoryTimesteps, st.HistoryTimesteps[1:])
	st.ModelOutputs[order-1] = x0
	st.HistoryTimesteps[order-1] = t
	thisOrder := order
	if u.cfg.LowerOrderFinal {
		thisOrder = min(order, len(u.timesteps)-idx)
	}
	st.ThisOrder = min(thisOrder, st.LowerOrderNums+1)
	st.LastSample = sample
	prev := u.predictor(st, sample, idx, st.ThisOrder)
	if st.LowerOrderNums < order {
		st.LowerOrderNums++
	}
	st.StepIndex++
	return prev, nil
}

// checkState reports a state that does not fit this scheduler or a latent of n values.
func (u *UniPC) checkState(st *UniPCState, n int) error {
	order := u.cfg.SolverOrder
	switch {
	case st == nil:
		return fmt.Errorf("sched: UniPC step: nil state")
	case len(st.ModelOutputs) != order || len(st.HistoryTimesteps) != order:
		return fmt.Errorf("sched: UniPC state holds %d/%d history entries, solver_order is %d", len(st.ModelOutputs), len(st.HistoryTimesteps), order)
	case st.LowerOrderNums < 0 || st.LowerOrderNums > order || st.ThisOrder < 0 || st.ThisOrder > order:
		return fmt.Errorf("sched: UniPC state orders %d/%d outside [0, %d]", st.LowerOrderNums, st.ThisOrder, order)
	case st.LastSample != nil && len(st.LastSample) != n:
		return fmt.Errorf("sched: UniPC state's last sample has %d values, sample %d", len(st.LastSample), n)
	}
	for _, m := range st.ModelOutputs {
		if m != nil && len(m) != n {
			return fmt.Errorf("sched: UniPC state's history has %d values, sample %d", len(m), n)
		}
	}
	// The corrector and predictor read LowerOrderNums / ThisOrder entries back from the
	// end of the history; a state missing them cannot have come from Step.
	need := max(st.LowerOrderNums, st.ThisOrder)
	for i := order - need; i < order; i++ {
		if st.ModelOutputs[i] == nil {
			return fmt.Errorf("sched: UniPC state: history entry %d missing for order %d", i, need)
		}
	}
	if st.ThisOrder > 0 && st.LastSample == nil {
		return fmt.Errorf("sched: UniPC state has an order but no last sample")
	}
	if st.StepIndex >= 0 && st.StepIndex < need {
		return fmt.Errorf("sched: UniPC state: step index %d with %d history entries", st.StepIndex, need)
	}
	return nil
}

// alphaSigma is _sigma_to_alpha_sigma_t in float32.
func (u *UniPC) alphaSigma(s float32) (alpha, sigma float32) {
	if u.cfg.UseFlowSigmas {
		return 1 - s, s
	}
	a := 1 / sqrt32(float32(s*s)+1)
	return a, float32(s * a)
}

// lambda is log(α) − log(σ) of the sigma at index i, in float32.
func (u *UniPC) lambda(i int) float32 {
	a, s := u.alphaSigma(u.sigmas[i])
	return log32(a) - log32(s)
}

// convertModelOutput is convert_model_output at step idx: the x0 prediction (predict_x0)
// or the noise prediction, as a new slice.
func (u *UniPC) convertModelOutput(mo, x []float32, idx int) []float32 {
	sigma := u.sigmas[idx]
	alphaT, sigmaT := u.alphaSigma(sigma)
	out := make([]float32, len(x))
	switch pred := u.cfg.PredictionType; {
	case u.cfg.PredictX0 && pred == PredFlow:
		for i := range out {
			out[i] = x[i] - float32(sigma*mo[i])
		}
	case u.cfg.PredictX0 && pred == PredEpsilon:
		for i := range out {
			out[i] = (x[i] - float32(sigmaT*mo[i])) / alphaT
		}
	case u.cfg.PredictX0 && pred == PredVPrediction:
		for i := range out {
			out[i] = float32(alphaT*x[i]) - float32(sigmaT*mo[i])
		}
	case pred == PredSample && u.cfg.PredictX0, pred == PredEpsilon:
		copy(out, mo)
	case pred == PredSample:
		for i := range out {
			out[i] = (x[i] - float32(alphaT*mo[i])) / sigmaT
		}
	case pred == PredVPrediction:
		for i := range out {
			out[i] = float32(alphaT*mo[i]) + float32(sigmaT*x[i])
		}
	}
	return out
}

// bhCoeffs returns h·φ1(h), B(h), and the system R (rows rks^(i−1)) and b of the B(h)
// update of the given order, as float32 like diffusers' 0-dim tensors.
func (u *UniPC) bhCoeffs(h float32, rks []float32, order int) (hPhi1, bh float32, r [][]float32, b []float32) {
	hh := h
	if u.cfg.PredictX0 {
		hh = -h
	}
	hPhi1 = expm1f32(hh)
	hPhiK := hPhi1/hh - 1
	factorial := 1
	bh = hh
	if u.cfg.SolverType == "bh2" {
		bh = expm1f32(hh)
	}
	for i := 1; i <= order; i++ {
		row := make([]float32, len(rks))
		for k, rk := range rks {
			row[k] = powi32(rk, i-1)
		}
		r = append(r, row)
		b = append(b, float32(hPhiK*float32(factorial))/bh)
		factorial *= i + 1
		hPhiK = hPhiK/hh - float32(1/float64(factorial))
	}
	return hPhi1, bh, r, b
}

// differences returns rks and D1s of the B(h) updates: for i = 1..order−1 the ratio
// r_i = (λ(s_i) − λ0)/h and (m_i − m0)/r_i, where m_i is the i-th history entry back
// from m0 and s_i = base − i.
func (u *UniPC) differences(st *UniPCState, m0 []float32, lambda0, h float32, base, histEnd, order int) (rks []float32, d1s [][]float32) {
	for i := 1; i < order; i++ {
		mi := st.ModelOutputs[histEnd-i]
		rk := (u.lambda(base-i) - lambda0) / h
		rks = append(rks, rk)
		d := make([]float32, len(m0))
		for e := range d {
			d[e] = (mi[e] - m0[e]) / rk
		}
		d1s = append(d1s, d)
	}
	return append(rks, 1), d1s
}

// combine is torch.einsum("k,bkc...->bc...", rhos, D1s) at element e: the products summed
// in k order.
func combine(rhos []float32, d1s [][]float32, e int) float32 {
	acc := float32(rhos[0] * d1s[0][e])
	for k := 1; k < len(d1s); k++ {
		acc += float32(rhos[k] * d1s[k][e])
	}
	return acc
}

// predictor is multistep_uni_p_bh_update: the sample at sigma[idx+1] from sample at
// sigma[idx] and the history (whose last entry is this step's prediction).
func (u *UniPC) predictor(st *UniPCState, x []float32, idx, order int) []float32 {
	last := len(st.ModelOutputs) - 1
	m0 := st.ModelOutputs[last]
	alphaT, sigmaT := u.alphaSigma(u.sigmas[idx+1])
	alphaS0, sigmaS0 := u.alphaSigma(u.sigmas[idx])
	lambdaS0 := log32(alphaS0) - log32(sigmaS0)
	h := (log32(alphaT) - log32(sigmaT)) - lambdaS0
	rks, d1s := u.differences(st, m0, lambdaS0, h, idx, last, order)
	hPhi1, bh, r, b := u.bhCoeffs(h, rks, order)
	var rhos []float32
	if len(d1s) > 0 {
		if order == 2 {
			rhos = []float32{0.5}
		} else {
			n := order - 1
			a := make([]float32, 0, n*n)
			for _, row := range r[:n] {
				a = append(a, row[:n]...)
			}
			rhos = solve32(a, b[:n], false) // R[:-1, :-1] is a strided view in torch
		}
	}
	c1, c2, c3 := u.updateCoeffs(alphaT, sigmaT, alphaS0, sigmaS0, hPhi1, bh)
	out := make([]float32, len(x))
	zero := float32(c3 * 0) // diffusers multiplies by pred_res = 0 (NaN when B(h) is infinite)
	for e := range out {
		xt := float32(c1*x[e]) - float32(c2*m0[e])
		if d1s != nil {
			out[e] = xt - float32(c3*combine(rhos, d1s, e))
		} else {
			out[e] = xt - zero
		}
	}
	return out
}

// corrector is multistep_uni_c_bh_update: sample (at sigma[idx], produced by the last
// predictor from st.LastSample) corrected with this step's prediction x0, before x0
// enters the history.
func (u *UniPC) corrector(st *UniPCState, x0, sample []float32, idx int) []float32 {
	order := st.ThisOrder
	last := len(st.ModelOutputs) - 1
	m0 := st.ModelOutputs[last]
	x := st.LastSample
	alphaT, sigmaT := u.alphaSigma(u.sigmas[idx])
	alphaS0, sigmaS0 := u.alphaSigma(u.sigmas[idx-1])
	lambdaS0 := log32(alphaS0) - log32(sigmaS0)
	h := (log32(alphaT) - log32(sigmaT)) - lambdaS0
	rks, d1s := u.differences(st, m0, lambdaS0, h, idx-1, last, order)
	hPhi1, bh, r, b := u.bhCoeffs(h, rks, order)
	var rhos []float32
	if order == 1 {
		rhos = []float32{0.5}
	} else {
		a := make([]float32, 0, order*order)
		for _, row := range r {
			a = append(a, row...)
		}
		rhos = solve32(a, b, true) // torch.stack(R) is contiguous
	}
	rLast := rhos[len(rhos)-1]
	c1, c2, c3 := u.updateCoeffs(alphaT, sigmaT, alphaS0, sigmaS0, hPhi1, bh)
	out := make([]float32, len(sample))
	for e := range out {
		xt := float32(c1*x[e]) - float32(c2*m0[e])
		d1t := x0[e] - m0[e]
		corr := float32(rLast * d1t)
		if d1s != nil {
			corr = combine(rhos, d1s, e) + corr
		}
		out[e] = xt - float32(c3*corr)
	}
	return out
}

// updateCoeffs returns the scalar factors of x, m0 and the residual in the B(h) updates:
// σt/σs0, αt·hφ1, αt·B(h) for predict_x0, else αt/αs0, σt·hφ1, σt·B(h).
func (u *UniPC) updateCoeffs(alphaT, sigmaT, alphaS0, sigmaS0, hPhi1, bh float32) (c1, c2, c3 float32) {
	if u.cfg.PredictX0 {
		return sigmaT / sigmaS0, alphaT * hPhi1, alphaT * bh
	}
	return alphaT / alphaS0, sigmaT * hPhi1, sigmaT * bh
}
