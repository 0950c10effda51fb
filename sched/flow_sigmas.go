package sched

import (
	"math"
)

// This file holds the float64 schedule arithmetic the flow-matching schedulers (UniPC with
// flow sigmas, FlowMatchEulerDiscrete) share, written to round exactly like the numpy
// expressions in diffusers v0.35.2. Products that feed a sum are wrapped in float64(...) so
// that Go never fuses them into an FMA (numpy rounds twice).

// npLinspace is numpy.linspace(start, stop, n) in float64: start + i·step with step =
// (stop−start)/(n−1), two roundings per element, and the last element forced to stop.
// With n == 1 it is [start].
func npLinspace(start, stop float64, n int) []float64 {
	out := make([]float64, n)
	if n == 1 {
		out[0] = start
		return out
	}
	delta := stop - start
	step := delta / float64(n-1)
	for i := range out {
		if step == 0 {
			out[i] = float64(float64(i)/float64(n-1)*delta) + start
		} else {
			out[i] = float64(float64(i)*step) + start
		}
	}
	out[n-1] = stop
	return out
}

// npArangeDown is numpy.arange(start, 0, −step) in float64 for start, step > 0: its length
// is ceil(start/step) and element i is start + i·d, where d is the difference of the first
// two elements, (start − step) − start, as numpy's fill computes it.
func npArangeDown(start, step float64) []float64 {
	n := int(math.Ceil((0 - start) / -step))
	if n <= 0 {
		return nil
	}
	out := make([]float64, n)
	out[0] = start
	if n > 1 {
		d := (start + -step) - start
		for i := 1; i < n; i++ {
			out[i] = start + float64(float64(i)*d)
		}
	}
	return out
}

// flowShift is diffusers' static flow shift shift·s / (1 + (shift−1)·s) in float64.
func flowShift(shift, s float64) float64 {
	return shift * s / (1 + float64((shift-1)*s))
}

// timeShiftExponential is FlowMatchEulerDiscreteScheduler._time_shift_exponential with
// sigma = 1: e^mu / (e^mu + (1/t − 1)).
func timeShiftExponential(mu, t float64) float64 {
	return math.Exp(mu) / (math.Exp(mu) + (1/t - 1))
}

// timeShiftLinear is FlowMatchEulerDiscreteScheduler._time_shift_linear with sigma = 1.
func timeShiftLinear(mu, t float64) float64 {
	return mu / (mu + (1/t - 1))
}

// exponentialSigmas is diffusers' _convert_to_exponential: exp(linspace(ln σmax, ln σmin, n)).
func exponentialSigmas(sigmaMin, sigmaMax float64, n int) []float64 {
	out := npLinspace(math.Log(sigmaMax), math.Log(sigmaMin), n)
	for i, v := range out {
		out[i] = math.Exp(v)
	}
	return out
}
