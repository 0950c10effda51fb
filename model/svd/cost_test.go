package svd_test

import (
	"testing"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/vae"
)

// TestDecodeActivationBytes: the sampler's decode estimate is the VAE's DecodeBytes for
// the decode it runs (the job's frames, size, decode chunk and tiling; on the go backend
// with vdpp's fused ops, nn.RowParallelism calls at once on the Go heap), and the step
// estimate is at least it. Not parallel: it sets VDPP_ROW_PARALLELISM.
func TestDecodeActivationBytes(t *testing.T) {
	s := openBuiltin(t)
	p := s.DefaultParams()
	p.Width, p.Height, p.NumFrames, p.DecodeChunkSize = 256, 256, 14, 7
	want := s.P.VAEConfig.DecodeBytes(vae.DecodeShape{Frames: 14, Height: 256, Width: 256, Chunk: 7,
		Parallel: nn.RowParallelism(s.P.Backend), Fused: true, GoHeap: true})
	if got := s.DecodeActivationBytes(p); got != want || got <= 0 {
		t.Errorf("256x256, 14 frames, chunks of 7: %d B, want %d", got, want)
	}
	if step, dec := s.StepActivationBytes(p), s.DecodeActivationBytes(p); step < dec {
		t.Errorf("step estimate %d B under the decode's %d B", step, dec)
	}
	tiled := p
	tiled.VAETile = 128
	if a, b := s.DecodeActivationBytes(tiled), s.DecodeActivationBytes(p); a >= b {
		t.Errorf("tiles of 128: %d B, untiled %d B", a, b)
	}
	// One call at a time (as on one core): shorter chunks hold fewer frames at once; two
	// at a time, two chunks of 7 hold as many as one call of 14.
	t.Setenv("VDPP_ROW_PARALLELISM", "1")
	short := p
	short.DecodeChunkSize = 2
	if a, b := s.DecodeActivationBytes(short), s.DecodeActivationBytes(p); a >= b {
		t.Errorf("one call at a time: chunks of 2 %d B, chunks of 7 %d B", a, b)
	}
	t.Setenv("VDPP_ROW_PARALLELISM", "2")
	whole := p
	whole.DecodeChunkSize = 0
	if a, b := s.DecodeActivationBytes(p), s.DecodeActivationBytes(whole); a != b {
		t.Errorf("two calls at a time: chunks of 7 %d B, one call of 14 frames %d B", a, b)
	}
}
