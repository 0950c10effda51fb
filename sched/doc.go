// Package sched implements the noise schedulers used by vdpp's denoising loop, starting
// with diffusers' EulerDiscreteScheduler as Stable Video Diffusion configures it (Karras
// sigmas, continuous timesteps 0.25·ln σ, v-prediction, no churn).
//
// Contract: the package is pure, deterministic math. It has no goroutines, no clocks and
// no GoMLX graphs; the only I/O is LoadConfig, a thin wrapper around ParseConfig.
// Schedules (Sigmas, Timesteps, InitNoiseSigma) and the per-step float32 arithmetic
// (ScaleModelInput, Step, CFGCombine, GuidanceWeights) follow the float32 operation order
// of the PyTorch reference so that results are bit-identical to it (see
// diffusers' schedulers/scheduling_euler_discrete.py, checked against torch-computed
// vectors by the tests); the only documented exception is the model timestep,
// which is the correctly rounded 0.25·ln σ and may differ from torch's float32 log by
// one ulp. The per-step functions work on flat []float32 data, never allocate, and
// accept dst aliasing any input.
package sched
