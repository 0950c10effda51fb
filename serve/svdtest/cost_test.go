package svdtest

import (
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
)

// TestConditionCost: a served model's step memory counts its image's conditioning where
// the family estimates it (family.ConditionEstimator): on the built-in SVD model's configs
// a 512x512 job of 2 frames conditions on its image with a larger layer (the VAE encoder
// at full size, the mid block's attention over 64x64 positions) than its UNet call has,
// so the job is admitted by the conditioning's estimate, where it was by the UNet's alone;
// the native job's UNet call stays the larger.
//
// Measured with scripts/svdmem (VmHWM growth of one stage in a fresh process, go backend,
// 2-core AMD EPYC Zen 4 at load average 10, docs/measurements/serve-i2v-memory-2026-12-07.md):
// for that job the conditioning grows the process by 253 MB and the UNet step by 213 MB,
// against estimates of 137 and 32 MB (SVD's estimates are unetcost's largest layer, a
// lower bound); the decode (7-frame chunks) grows it by 875 MB, which neither estimate
// counts.
func TestConditionCost(t *testing.T) {
	p, err := svd.Load(filepath.Join("..", "..", "builtin", "model"), "", nil, svd.Parts{}) // configs only
	if err != nil {
		t.Fatal(err)
	}
	s := svd.NewSampler(p, checkpoint.DefaultSampling)
	g := serve.NewModel(s, family.Description{}, serve.ModelSpec{})
	defer g.Close()
	act := g.Activation()

	small := g.DefaultParams()
	small.Width, small.Height, small.NumFrames = 512, 512, 2
	step, cond := s.StepActivationBytes(family.Params(small)), s.ConditionActivationBytes(family.Params(small))
	if cond <= step || act(small) != cond {
		t.Fatalf("512x512, 2 frames: served estimate %d B; UNet call %d B, conditioning %d B", act(small), step, cond)
	}
	// The VAE encoder's mid-block attention alone: one head's scores and softmax over
	// 64x64 positions.
	if cond < 4*2*4096*4096 {
		t.Fatalf("conditioning %d B, less than the encoder's attention scores", cond)
	}
	native := g.DefaultParams()
	if step, cond := s.StepActivationBytes(family.Params(native)), s.ConditionActivationBytes(family.Params(native)); act(native) != max(step, cond) || cond <= 0 {
		t.Fatalf("native job %+v: served estimate %d B; UNet call %d B, conditioning %d B", native, act(native), step, cond)
	}
	// Admission: limits derived from the native job refuse the small job by its
	// conditioning, which its UNet call alone would have let through.
	l := job.DeriveCostLimits(native, act, 1)
	stepOnly := job.DeriveCostLimits(native, func(p job.Params) int64 { return s.StepActivationBytes(family.Params(p)) }, 1)
	t.Logf("native %dx%d %d frames; limits %d B (step only %d B); the small job %d B", native.Width, native.Height, native.NumFrames, l.MaxActivationBytes, stepOnly.MaxActivationBytes, act(small))
}
