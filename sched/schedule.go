package sched

import (
	"math"
)

// karrasRho is the ρ of Karras et al. (2022) used by diffusers' _convert_to_karras.
const karrasRho = 7.0

// numpyLinspace01 returns numpy.linspace(0, 1, n) in float64: i·(1/(n−1)) with the last
// element forced to exactly 1.
func numpyLinspace01(n int) []float64 {
	out := make([]float64, n)
	if n == 1 {
		return out
	}
	step := 1.0 / float64(n-1)
	for i := range out {
		out[i] = float64(i) * step
	}
	out[n-1] = 1
	return out
}

// karrasSigmas returns the n Karras sigmas (float64, before the float32 cast) between
// sigmaMax and sigmaMin, exactly like diffusers' _convert_to_karras.
func karrasSigmas(sigmaMin, sigmaMax float64, n int) []float64 {
	ramp := numpyLinspace01(n)
	minInv := math.Pow(sigmaMin, 1/karrasRho)
	maxInv := math.Pow(sigmaMax, 1/karrasRho)
	out := make([]float64, n)
	for i, r := range ramp {
		out[i] = math.Pow(maxInv+r*(minInv-maxInv), karrasRho)
	}
	return out
}

// trainingTable holds diffusers' training noise levels: sigmas[t] = √((1−ᾱ_t)/ᾱ_t) and
// their logs, both float32 like the reference (torch tensors, then numpy).
type trainingTable struct {
	sigmas    []float32
	logSigmas []float32
}

// newTrainingTable builds the table: betas from torch.linspace in float32 (squared for
// scaled_linear), ᾱ = cumprod(1−β) accumulated in float64 as torch's CPU cumprod does.
// Only non-SVD configurations (null sigma_min/sigma_max, discrete timesteps,
// final_sigmas_type "sigma_min") use it; agreement with torch there is to a few ulp.
func newTrainingTable(c Config) trainingTable {
	n := c.NumTrainTimesteps
	var betas []float32
	if c.BetaSchedule == "scaled_linear" {
		betas = TorchLinspace(float32(math.Sqrt(c.BetaStart)), float32(math.Sqrt(c.BetaEnd)), n)
		for i, b := range betas {
			betas[i] = b * b
		}
	} else {
		betas = TorchLinspace(float32(c.BetaStart), float32(c.BetaEnd), n)
	}
	t := trainingTable{sigmas: make([]float32, n), logSigmas: make([]float32, n)}
	acc := 1.0
	for i, b := range betas {
		acc *= float64(1 - b)
		acp := float32(acc)
		s := float32(math.Sqrt(float64((1 - acp) / acp)))
		t.sigmas[i] = s
		t.logSigmas[i] = float32(math.Log(float64(s)))
	}
	return t
}

// spacedTimesteps returns diffusers' pre-Karras inference timesteps (float32, descending)
// for the configured timestep_spacing.
func spacedTimesteps(c Config, n int) []float32 {
	T := c.NumTrainTimesteps
	out := make([]float32, 0, n)
	switch c.TimestepSpacing {
	case "linspace":
		// np.linspace(0, T-1, n, dtype=float32)[::-1]
		step := float64(T-1) / float64(max(n-1, 1))
		for i := n - 1; i >= 0; i-- {
			v := float64(i) * step
			if i == n-1 && n > 1 {
				v = float64(T - 1)
			}
			out = append(out, float32(v))
		}
	case "leading":
		ratio := T / n
		for i := n - 1; i >= 0; i-- {
			out = append(out, float32(i*ratio)+float32(c.StepsOffset))
		}
	case "trailing":
		// np.arange(T, 0, -T/n).round() - 1
		ratio := float64(T) / float64(n)
		for i := 0; float64(T)-float64(i)*ratio > 0; i++ {
			out = append(out, float32(math.RoundToEven(float64(T)-float64(i)*ratio))-1)
		}
	}
	return out
}

// interp is numpy.interp(x, arange(len(ys)), ys) in float64.
func interp(x float64, ys []float32) float64 {
	if x <= 0 {
		return float64(ys[0])
	}
	last := len(ys) - 1
	if x >= float64(last) {
		return float64(ys[last])
	}
	j := int(math.Floor(x))
	if x == float64(j) {
		return float64(ys[j])
	}
	slope := float64(ys[j+1]) - float64(ys[j])
	return slope*(x-float64(j)) + float64(ys[j])
}

// sigmaToT is diffusers' _sigma_to_t: piecewise-linear inverse of the log training
// sigmas, giving a fractional discrete timestep.
func sigmaToT(sigma float64, logSigmas []float32) float64 {
	logSigma := math.Log(math.Max(sigma, 1e-10))
	low := -1
	for j, ls := range logSigmas {
		if logSigma-float64(ls) >= 0 {
			low = j
		}
	}
	low = min(max(low, 0), len(logSigmas)-2)
	lo, hi := logSigmas[low], logSigmas[low+1]
	w := (float64(lo) - logSigma) / float64(lo-hi)
	w = min(max(w, 0), 1)
	return (1-w)*float64(low) + w*float64(low+1)
}

// schedule computes (sigmas[n+1], timesteps[n]) in float32 like set_timesteps.
func schedule(c Config, n int) (sigmas, timesteps []float32) {
	var table *trainingTable
	needTable := c.SigmaMin == nil || c.SigmaMax == nil || !c.continuousTimesteps() ||
		c.FinalSigmasType == "sigma_min"
	if needTable {
		t := newTrainingTable(c)
		table = &t
	}
	var smin, smax float64
	if c.SigmaMin != nil {
		smin = *c.SigmaMin
	}
	if c.SigmaMax != nil {
		smax = *c.SigmaMax
	}
	if c.SigmaMin == nil || c.SigmaMax == nil {
		ts := spacedTimesteps(c, n)
		if c.SigmaMax == nil {
			smax = interp(float64(ts[0]), table.sigmas)
		}
		if c.SigmaMin == nil {
			smin = interp(float64(ts[len(ts)-1]), table.sigmas)
		}
	}
	s64 := karrasSigmas(smin, smax, n)
	sigmas = make([]float32, n+1)
	for i, s := range s64 {
		sigmas[i] = float32(s)
	}
	if c.FinalSigmasType == "sigma_min" {
		sigmas[n] = table.sigmas[0]
	}
	timesteps = make([]float32, n)
	for i := range timesteps {
		if c.continuousTimesteps() {
			// 0.25·ln σ of the float32 σ, correctly rounded (torch's float32 log may be 1 ulp off).
			timesteps[i] = float32(0.25 * math.Log(float64(sigmas[i])))
		} else {
			timesteps[i] = float32(sigmaToT(s64[i], table.logSigmas))
		}
	}
	return sigmas, timesteps
}

// initNoiseSigma is diffusers' init_noise_sigma property, in float32 on the float32
// sigmas: max σ for linspace/trailing spacing, otherwise √(max σ² + 1).
func initNoiseSigma(c Config, sigmas []float32) float32 {
	m := sigmas[0]
	for _, s := range sigmas {
		m = max(m, s)
	}
	if c.TimestepSpacing == "linspace" || c.TimestepSpacing == "trailing" {
		return m
	}
	return sqrt32(float32(m*m) + 1)
}

// sqrt32 is the correctly rounded float32 square root.
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
