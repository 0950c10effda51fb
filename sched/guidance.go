package sched

import (
	"fmt"
	"math"
)

// torchVecWidth is the float32 lane count of torch's AVX2 CPU kernels.
const torchVecWidth = 8

// fma32 returns a·b + c rounded once to float32. The float64 product of two float32
// values is exact, so only the (rare) double rounding of the sum can differ from a true
// float32 FMA; for the small integer multipliers used here the sum is exact as well.
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// TorchLinspace returns torch.linspace(start, end, steps) for float32 as computed by
// torch's CPU kernel built for AVX2 (the variant that produced the reference values in
// the scheduler tests' reference vectors): step = (end−start)/(steps−1) in float32; element i is
// start + step·i for i < steps/2 and end − step·(steps−1−i) otherwise, each with a fused
// multiply-add; except that, in blocks of 16 elements taken from the front while 16
// remain, every 8-lane vector computes its first lane that way and lane j as
// base + j·step with two roundings. This matches torch's values bit for bit where the
// plain formula (numpy's emulation in svd_scheduler_ref.py) is up to 1 ulp off.
func TorchLinspace(start, end float32, steps int) []float32 {
	if steps <= 0 {
		return nil
	}
	out := make([]float32, steps)
	if steps == 1 {
		out[0] = start
		return out
	}
	step := (end - start) / float32(steps-1)
	half := steps / 2
	at := func(i int) float32 {
		if i < half {
			return fma32(step, float32(i), start)
		}
		return fma32(-step, float32(steps-i-1), end)
	}
	// vectorized_loop: pairs of 8-lane vectors while 16 elements remain, then scalar.
	i := 0
	for ; i <= steps-2*torchVecWidth; i += 2 * torchVecWidth {
		for v := i; v < i+2*torchVecWidth; v += torchVecWidth {
			base := at(v)
			for j := 0; j < torchVecWidth; j++ {
				out[v+j] = base + float32(float32(j)*step)
			}
		}
	}
	for ; i < steps; i++ {
		out[i] = at(i)
	}
	return out
}

// GuidanceWeights returns the per-frame classifier-free guidance scales of the SVD
// pipeline, torch.linspace(minG, maxG, frames) in float32 (see TorchLinspace): frame 0
// gets minG and the last frame maxG.
func GuidanceWeights(minG, maxG float32, frames int) []float32 {
	return TorchLinspace(minG, maxG, frames)
}

// CFGCombine writes the guided prediction uncond + g·(cond − uncond) into dst, float32
// in diffusers' operation order, with g = weights[f] for the frameStride elements of
// frame f (the latent of one video is [T, C, H, W], so frameStride = C·H·W). When dst
// holds several videos ([B, T, C, H, W]) the weights repeat per video. dst may alias
// uncond or cond. It does not allocate.
func CFGCombine(dst, uncond, cond, weights []float32, frameStride int) error {
	n := len(dst)
	if len(uncond) != n || len(cond) != n {
		return fmt.Errorf("sched: cfg length mismatch: dst %d, uncond %d, cond %d", n, len(uncond), len(cond))
	}
	if frameStride <= 0 || len(weights) == 0 || n%(frameStride*len(weights)) != 0 {
		return fmt.Errorf("sched: cfg: %d elements is not a multiple of %d frames x stride %d", n, len(weights), frameStride)
	}
	for base := 0; base < n; base += frameStride * len(weights) {
		for f, g := range weights {
			lo := base + f*frameStride
			u, c, d := uncond[lo:lo+frameStride], cond[lo:lo+frameStride], dst[lo:lo+frameStride]
			for i, ui := range u {
				d[i] = ui + float32(g*(c[i]-ui))
			}
		}
	}
	return nil
}
