package sched

import (
	"fmt"
	"math"
)

// uniPCTrainingSigmas returns diffusers' training sigmas √((1−ᾱ)/ᾱ) in float32 as
// UniPCMultistepScheduler.__init__ computes them: betas in float32 (torch.linspace, squared
// for scaled_linear, betas_for_alpha_bar for squaredcos_cap_v2), ᾱ = cumprod(1−β)
// accumulated in float64 by torch's CPU cumprod, then float32 arithmetic.
func uniPCTrainingSigmas(c UniPCConfig) []float32 {
	n := c.NumTrainTimesteps
	var betas []float32
	switch c.BetaSchedule {
	case "scaled_linear":
		betas = TorchLinspace(float32(math.Sqrt(c.BetaStart)), float32(math.Sqrt(c.BetaEnd)), n)
		for i, b := range betas {
			betas[i] = b * b
		}
	case "squaredcos_cap_v2":
		alphaBar := func(t float64) float64 {
			v := math.Cos((t + 0.008) / 1.008 * math.Pi / 2)
			return v * v
		}
		betas = make([]float32, n)
		for i := range betas {
			t1, t2 := float64(i)/float64(n), float64(i+1)/float64(n)
			betas[i] = float32(math.Min(1-alphaBar(t2)/alphaBar(t1), 0.999))
		}
	default:
		betas = TorchLinspace(float32(c.BetaStart), float32(c.BetaEnd), n)
	}
	sigmas := make([]float32, n)
	acc := 1.0
	for i, b := range betas {
		acc *= float64(1 - b)
		acp := float32(acc)
		sigmas[i] = sqrt32((1 - acp) / acp)
	}
	return sigmas
}

// uniPCSpacedTimesteps returns the integer timesteps of set_timesteps before any sigma
// conversion, for the configured timestep_spacing (numpy float64 arithmetic, rounded half
// to even, truncated to int64).
func uniPCSpacedTimesteps(c UniPCConfig, n int) []int64 {
	T := c.NumTrainTimesteps
	var out []int64
	switch c.TimestepSpacing {
	case "linspace":
		// np.linspace(0, T−1, n+1).round()[::-1][:-1]
		lin := npLinspace(0, float64(T-1), n+1)
		for i := n; i >= 1; i-- {
			out = append(out, int64(math.RoundToEven(lin[i])))
		}
	case "leading":
		// (np.arange(0, n+1) * (T // (n+1))).round()[::-1][:-1] + steps_offset
		ratio := T / (n + 1)
		for i := n; i >= 1; i-- {
			out = append(out, int64(i*ratio+c.StepsOffset))
		}
	case "trailing":
		// np.arange(T, 0, −T/n).round() − 1
		for _, v := range npArangeDown(float64(T), float64(T)/float64(n)) {
			out = append(out, int64(math.RoundToEven(v))-1)
		}
	}
	return out
}

// npSigmaToT is diffusers' _sigma_to_t for a float64 sigma and float32 log sigmas, with
// numpy 1.24's value-based casting: the float64 log σ meets the float32 array as a float32
// scalar, so the distances and the interpolation weight are float32, and only the final
// (1−w)·low + w·high is float64. (The log sigmas themselves are correctly rounded here;
// numpy's SIMD float32 log can differ by an ulp, which can move a truncated timestep.)
func npSigmaToT(sigma float64, logSigmas []float32) float64 {
	logSigma := float32(math.Log(math.Max(sigma, 1e-10)))
	low := 0
	for j, ls := range logSigmas {
		if logSigma-ls >= 0 {
			low = j
		}
	}
	low = min(low, len(logSigmas)-2)
	lo, hi := logSigmas[low], logSigmas[low+1]
	w := (lo - logSigma) / (lo - hi)
	w = min(max(w, 0), 1)
	return float64(float64(1-w)*float64(low)) + float64(float64(w)*float64(low+1))
}

// finalSigma returns the sigma appended after the schedule: 0, or last for "sigma_min".
func (c UniPCConfig) finalSigma(last float64) float64 {
	if c.FinalSigmasType == "sigma_min" {
		return last
	}
	return 0
}

// UniPCSchedule is UniPCMultistepScheduler.set_timesteps(numSteps, mu=mu) as a pure
// function: the integer model timesteps and the float32 sigmas (one more than timesteps;
// the last is the final sigma). mu is used only with use_dynamic_shifting, where it sets
// flow_shift = e^mu (pass NaN otherwise). The float64 arithmetic follows diffusers' numpy
// expressions operation by operation, so for flow sigmas both outputs are exact.
//
// The number of timesteps is numSteps except with "trailing" spacing and the training
// sigmas, where numpy's arange can yield one more, as in diffusers.
func UniPCSchedule(c UniPCConfig, numSteps int, mu float64) (timesteps []int64, sigmas []float32, err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	if numSteps < 1 || numSteps > c.NumTrainTimesteps {
		return nil, nil, fmt.Errorf("sched: UniPC num_inference_steps must be in [1, %d], got %d", c.NumTrainTimesteps, numSteps)
	}
	if c.UseDynamicShifting != !math.IsNaN(mu) {
		return nil, nil, fmt.Errorf("sched: UniPC: mu must be given exactly when use_dynamic_shifting is set (mu %v)", mu)
	}
	T := c.NumTrainTimesteps
	timesteps = uniPCSpacedTimesteps(c, numSteps)
	var s64 []float64
	switch {
	case c.UseKarrasSigmas || c.UseExponentialSigmas:
		train := uniPCTrainingSigmas(c)
		logSigmas := make([]float32, T)
		for i, s := range train {
			logSigmas[i] = float32(math.Log(float64(s)))
		}
		smin, smax := float64(train[0]), float64(train[T-1])
		timesteps = make([]int64, numSteps)
		if c.UseKarrasSigmas {
			s64 = karrasSigmas(smin, smax, numSteps)
			for i, s := range s64 {
				timesteps[i] = int64(math.RoundToEven(npSigmaToT(s, logSigmas)))
			}
		} else {
			s64 = exponentialSigmas(smin, smax, numSteps)
			for i, s := range s64 {
				timesteps[i] = int64(npSigmaToT(s, logSigmas))
			}
		}
		s64 = append(s64, c.finalSigma(s64[numSteps-1]))
	case c.UseFlowSigmas:
		shift := c.FlowShift
		if c.UseDynamicShifting {
			shift = math.Exp(mu)
		}
		timesteps, s64 = flowSigmaSchedule(T, shift, numSteps)
		s64 = append(s64, c.finalSigma(s64[numSteps-1]))
	default:
		train := uniPCTrainingSigmas(c)
		s64 = make([]float64, len(timesteps), len(timesteps)+1)
		for i, t := range timesteps {
			s64[i] = interp(float64(t), train)
		}
		s64 = append(s64, c.finalSigma(float64(train[0])))
	}
	sigmas = make([]float32, len(s64))
	for i, s := range s64 {
		sigmas[i] = float32(s)
	}
	return timesteps, sigmas, nil
}

// flowSigmaSchedule is the use_flow_sigmas branch of set_timesteps that UniPC and
// DPM-Solver share: alphas = linspace(1, 1/T, n+1), s = 1 − alphas, sigmas =
// flip(shift(s))[:-1] in float64, and the model timesteps σ·T truncated to int64.
func flowSigmaSchedule(T int, shift float64, n int) (timesteps []int64, sigmas []float64) {
	alphas := npLinspace(1, 1/float64(T), n+1)
	sigmas = make([]float64, n, n+1)
	timesteps = make([]int64, n)
	for i := range sigmas {
		sigmas[i] = flowShift(shift, 1.0-alphas[n-i])
		timesteps[i] = int64(sigmas[i] * float64(T))
	}
	return timesteps, sigmas
}
