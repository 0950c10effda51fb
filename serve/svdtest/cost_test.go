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

// TestConditionCost: a served model's step memory counts its image's conditioning and its
// decode where the family estimates them (family.ConditionEstimator, and the decode inside
// family.ActivationEstimator): on the built-in SVD model's configs a 1024x1024 job of one
// frame conditions on its image with a larger layer (the VAE encoder's mid-block attention
// over 128x128 positions) than its UNet call and its decode need, so the job is admitted
// by the conditioning's estimate; a 512x512 job of 2 frames by its decode, which is larger
// than its UNet call and its conditioning.
//
// Measured with scripts/svdmem (VmHWM growth of one stage in a fresh process, go backend,
// 2-core AMD EPYC Zen 4 at load average 10, docs/measurements/serve-i2v-memory-2026-12-07.md):
// for the 512x512 job of 2 frames the conditioning grows the process by 253 MB, the UNet
// step by 213 MB and the decode (7-frame chunks) by 875 MB, against estimates of 137, 32
// and (on the go backend) 1188 MB.
func TestConditionCost(t *testing.T) {
	p, err := svd.Load(filepath.Join("..", "..", "builtin", "model"), "", nil, svd.Parts{}) // configs only
	if err != nil {
		t.Fatal(err)
	}
	s := svd.NewSampler(p, checkpoint.DefaultSampling)
	g := serve.NewModel(s, family.Description{}, serve.ModelSpec{})
	defer g.Close()
	act := g.Activation()

	large := g.DefaultParams()
	large.Width, large.Height, large.NumFrames = 1024, 1024, 1
	if err := s.Validate(family.Params(large)); err != nil {
		t.Fatal(err)
	}
	step, cond := s.StepActivationBytes(family.Params(large)), s.ConditionActivationBytes(family.Params(large))
	if cond <= step || act(large) != cond {
		t.Fatalf("1024x1024, 1 frame: served estimate %d B; UNet call and decode %d B, conditioning %d B", act(large), step, cond)
	}
	// The VAE encoder's mid-block attention alone: one head's scores and softmax over
	// 128x128 positions.
	if cond < 4*2*16384*16384 {
		t.Fatalf("conditioning %d B, less than the encoder's attention scores", cond)
	}
	small := g.DefaultParams()
	small.Width, small.Height, small.NumFrames = 512, 512, 2
	dec := s.DecodeActivationBytes(family.Params(small))
	if step, cond := s.StepActivationBytes(family.Params(small)), s.ConditionActivationBytes(family.Params(small)); act(small) != dec || dec != step || dec <= cond {
		t.Fatalf("512x512, 2 frames: served estimate %d B; UNet call and decode %d B, decode %d B, conditioning %d B", act(small), step, dec, cond)
	}
	native := g.DefaultParams()
	if step, cond := s.StepActivationBytes(family.Params(native)), s.ConditionActivationBytes(family.Params(native)); act(native) != max(step, cond) || cond <= 0 {
		t.Fatalf("native job %+v: served estimate %d B; UNet call %d B, conditioning %d B", native, act(native), step, cond)
	}
	// Admission: the limits derived from the native job, with and without the
	// conditioning, beside the large job's estimate.
	l := job.DeriveCostLimits(native, act, 1)
	stepOnly := job.DeriveCostLimits(native, func(p job.Params) int64 { return s.StepActivationBytes(family.Params(p)) }, 1)
	t.Logf("native %dx%d %d frames; limits %d B (step only %d B); the large job %d B", native.Width, native.Height, native.NumFrames, l.MaxActivationBytes, stepOnly.MaxActivationBytes, act(large))
}
