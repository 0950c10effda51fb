package svd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

func randDense(r *rand.Rand, shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

// framesOf copies frames [lo, hi) of x [N, T, ...].
func framesOf(x *tensor.Dense, lo, hi int) *tensor.Dense {
	n, t := x.Shape[0], x.Shape[1]
	per := x.Len() / (n * t)
	out := tensor.New(append([]int{n, hi - lo}, x.Shape[2:]...)...)
	for r := range n {
		copy(out.Data[r*(hi-lo)*per:(r+1)*(hi-lo)*per], x.Data[(r*t+lo)*per:(r*t+hi)*per])
	}
	return out
}

// TestPredictFrames: on the dev checkpoint, a guided batch (an unconditional and a
// conditional row) of 5 frames split 3 + 2 over two in-process members gives Predict's
// output on each member's frames within the context-parallel tolerance.
func TestPredictFrames(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(shared.Require(t, "golden", "dev"), "", b, Parts{Denoiser: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d := &Denoiser{P: p}
	cfg := p.UNetConfig
	const frames, h, w = 5, 8, 8
	c := cfg.InChannels / 2
	r := rand.New(rand.NewPCG(1, 2))
	cond := model.Conditioning{
		KeyImageEmbeddings: randDense(r, 1, 1, cfg.CrossAttentionDim[0]),
		KeyImageLatents:    randDense(r, 1, c, h, w),
		KeyAddedTimeIDs:    &tensor.Dense{Shape: []int{1, 3}, Data: []float32{6, 127, 0.02}},
	}
	in := model.Input{Latents: randDense(r, 2, frames, c, h, w), Sigma: 1.5, Timestep: 0.1,
		Cond: []model.Conditioning{cond, cond}, Uncond: []bool{true, false}}
	whole, err := d.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	trs := comm.NewLocal(2, comm.Options{RecvTimeout: 30 * time.Second})
	parts := []model.FramePart{{Lo: 0, Hi: 3, Total: frames}, {Lo: 3, Hi: 5, Total: frames}}
	outs := make([]*tensor.Dense, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, part := range parts {
		g, err := comm.NewGroup(trs[i], []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		part.Comm = g
		local := in
		local.Latents = framesOf(in.Latents, part.Lo, part.Hi)
		wg.Go(func() { outs[i], errs[i] = d.PredictFrames(context.Background(), local, part) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, part := range parts {
		want := framesOf(whole, part.Lo, part.Hi)
		if fmt.Sprint(outs[i].Shape) != fmt.Sprint(want.Shape) {
			t.Fatalf("member %d: shape %v, want %v", i, outs[i].Shape, want.Shape)
		}
		rel := tensor.RelL2(outs[i], want)
		t.Logf("member %d frames [%d, %d): rel L2 vs Predict %.3g", i, part.Lo, part.Hi, rel)
		if rel > 1e-5 || nn.UsesKernels(d.P.Backend) && !slices.Equal(outs[i].Data, want.Data) {
			t.Fatalf("member %d: rel L2 %.3g, want 0 with the CPU kernels (bit for bit) and at most 1e-5 elsewhere", i, rel)
		}
	}
	// A part whose size disagrees with the latents is refused.
	bad := parts[0]
	bad.Comm = (*comm.Group)(nil)
	if _, err := d.PredictFrames(context.Background(), in, bad); err == nil {
		t.Fatal("PredictFrames accepted 5 frames for the part [0, 3)")
	}
}
