package unet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// localComms returns the Comms of an in-process group of size members.
func localComms(t testing.TB, size int) []Comm {
	t.Helper()
	trs := comm.NewLocal(size, comm.Options{RecvTimeout: 30 * time.Second})
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = i
	}
	out := make([]Comm, size)
	for i, tr := range trs {
		g, err := comm.NewGroup(tr, ranks)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = g
	}
	return out
}

// frameRanges cuts t frames into the given counts.
func frameRanges(counts []int) []Frames {
	total := 0
	for _, c := range counts {
		total += c
	}
	out := make([]Frames, len(counts))
	lo := 0
	for i, c := range counts {
		out[i] = Frames{Lo: lo, Hi: lo + c, Total: total}
		lo += c
	}
	return out
}

// sliceT copies frames [lo, hi) of x [B, T, ...].
func sliceT(x *tensor.Dense, lo, hi int) *tensor.Dense {
	b, tt := x.Shape[0], x.Shape[1]
	per := x.Len() / (b * tt)
	out := tensor.New(append([]int{b, hi - lo}, x.Shape[2:]...)...)
	for r := range b {
		copy(out.Data[r*(hi-lo)*per:(r+1)*(hi-lo)*per], x.Data[(r*tt+lo)*per:(r*tt+hi)*per])
	}
	return out
}

// joinT concatenates [B, Ti, ...] parts along frames.
func joinT(parts []*tensor.Dense) *tensor.Dense {
	b := parts[0].Shape[0]
	total := 0
	for _, p := range parts {
		total += p.Shape[1]
	}
	per := parts[0].Len() / (b * parts[0].Shape[1])
	out := tensor.New(append([]int{b, total}, parts[0].Shape[2:]...)...)
	f := 0
	for _, p := range parts {
		ti := p.Shape[1]
		for r := range b {
			copy(out.Data[(r*total+f)*per:(r*total+f+ti)*per], p.Data[r*ti*per:(r+1)*ti*per])
		}
		f += ti
	}
	return out
}

// forwardCP runs ForwardFrames on one goroutine per member (frame counts counts) and
// joins the members' outputs.
func forwardCP(t testing.TB, m *Model, counts []int, sample, ts, ehs, ids *tensor.Dense) *tensor.Dense {
	t.Helper()
	parts := frameRanges(counts)
	comms := localComms(t, len(counts))
	outs := make([]*tensor.Dense, len(counts))
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			outs[i], errs[i] = m.ForwardFrames(context.Background(), sliceT(sample, p.Lo, p.Hi), ts, ehs, ids, p, comms[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		want := []int{sample.Shape[0], counts[i], m.cfg.OutChannels, sample.Shape[3], sample.Shape[4]}
		if fmt.Sprint(o.Shape) != fmt.Sprint(want) {
			t.Fatalf("member %d: shape %v, want %v", i, o.Shape, want)
		}
	}
	return joinT(outs)
}

// cpTolerance is the contract where vdpp's CPU kernels do not run (XLA): the
// context-parallel output matches the one-rank UNet within this relative L2 in fp32. Where
// they run it is the one-rank output bit for bit (requireCP).
const cpTolerance = 1e-5

// requireCP fails t unless got, the joined output of the members, is one, the one-rank
// output: bit for bit on a backend with vdpp's fused CPU kernels, within cpTolerance
// elsewhere.
func requireCP(t *testing.T, m *Model, got, one *tensor.Dense) {
	t.Helper()
	if !nn.UsesKernels(m.prog.Backend()) {
		if rel := tensor.RelL2(got, one); rel > cpTolerance {
			t.Fatalf("rel L2 vs one rank %.3g > %g", rel, cpTolerance)
		}
		return
	}
	if !tensor.SameShape(got, one) {
		t.Fatalf("shape %v, one rank %v", got.Shape, one.Shape)
	}
	for i := range one.Data {
		if math.Float32bits(got.Data[i]) != math.Float32bits(one.Data[i]) {
			t.Fatalf("element %d: %v, one rank %v (rel L2 %.3g): not bit for bit", i, got.Data[i], one.Data[i], tensor.RelL2(got, one))
		}
	}
}

// TestForwardFramesGolden: on the dev checkpoint's unet_forward case (3 frames), 2 and 3
// members give the one-rank output bit for bit (requireCP; one member is covered by
// TestForwardFramesConfigs).
func TestForwardFramesGolden(t *testing.T) {
	ck := devCheckpoint(t)
	m := devModel(t, "")
	in := readCase(t, ck, "unet_forward", "inputs")
	ref := readCase(t, ck, "unet_forward", "outputs")["sample_out"]
	s, ts, e, ids := in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"]
	one, err := m.Forward(s, ts, e, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, counts := range [][]int{{2, 1}, {1, 1, 1}} {
		t.Run(fmt.Sprintf("C=%d", len(counts)), func(t *testing.T) {
			start := time.Now()
			got := forwardCP(t, m, counts, s, ts, e, ids)
			rel := tensor.RelL2(got, one)
			t.Logf("frames %v: rel L2 vs one rank %.3g, vs diffusers %.3g (one rank %.3g); %v",
				counts, rel, tensor.RelL2(got, ref), tensor.RelL2(one, ref), time.Since(start))
			requireCP(t, m, got, one)
		})
	}
}

// TestForwardFramesConfigs: random small configs with uneven frame counts, non-square and
// odd latent sizes (upsampling to the skip's size), two-layer transformers, and a level
// with fewer positions than members (empty spatial slices), and one member (the segmented
// forward itself), each bit for bit (requireCP). Running each member's frames alone
// through Forward must differ clearly: the exchanges carry real information.
func TestForwardFramesConfigs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    string
		b      int
		h, w   int
		counts []int
	}{
		{"T=5 C=2 uneven", smallConfig2, 2, 8, 8, []int{3, 2}},
		{"T=5 C=3 7x5", smallConfig2, 1, 7, 5, []int{2, 2, 1}},
		{"3 levels T=4 C=3 4x4 (1 position at the mid block)", smallConfig3, 2, 4, 4, []int{2, 1, 1}},
		{"3 levels T=4 C=1 4x4", smallConfig3, 2, 4, 4, []int{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, tc.cfg)
			m, err := New(cfg, randomWeights(t, cfg, 11), backend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			total := 0
			for _, c := range tc.counts {
				total += c
			}
			sample := randomTensor(21, tc.b, total, cfg.InChannels, tc.h, tc.w)
			ehs := randomTensor(22, tc.b, 1, cfg.CrossAttentionDim[0])
			ids := randomTensor(23, tc.b, cfg.NumAddedTimeIDs())
			ts := &tensor.Dense{Shape: []int{1}, Data: []float32{0.4}}
			one, err := m.Forward(sample, ts, ehs, ids)
			if err != nil {
				t.Fatal(err)
			}
			got := forwardCP(t, m, tc.counts, sample, ts, ehs, ids)
			rel := tensor.RelL2(got, one)
			// Each member's frames alone: what a model without exchanges would give.
			var alone []*tensor.Dense
			for _, p := range frameRanges(tc.counts) {
				o, err := m.Forward(sliceT(sample, p.Lo, p.Hi), ts, ehs, ids)
				if err != nil {
					t.Fatal(err)
				}
				alone = append(alone, o)
			}
			indep := tensor.RelL2(joinT(alone), one)
			t.Logf("rel L2 vs one rank %.3g; independent chunks %.3g", rel, indep)
			requireCP(t, m, got, one)
			if len(tc.counts) > 1 && indep < 1e-3 {
				t.Fatalf("independent chunks are only %.3g from the whole: the test cannot see a missing exchange", indep)
			}
		})
	}
}

// TestForwardFramesLayoutErrors: members whose ranges do not tile the video fail with
// ErrFrames on every member instead of computing garbage.
func TestForwardFramesLayoutErrors(t *testing.T) {
	cfg := parseConfig(t, smallConfig2)
	m, err := New(cfg, randomWeights(t, cfg, 3), backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ehs := randomTensor(2, 1, 1, cfg.CrossAttentionDim[0])
	ids := randomTensor(3, 1, cfg.NumAddedTimeIDs())
	ts := &tensor.Dense{Shape: []int{1}, Data: []float32{0.4}}
	for _, tc := range []struct {
		name  string
		parts []Frames
	}{
		{"gap", []Frames{{Lo: 0, Hi: 2, Total: 5}, {Lo: 3, Hi: 5, Total: 5}}},
		{"swapped", []Frames{{Lo: 2, Hi: 5, Total: 5}, {Lo: 0, Hi: 2, Total: 5}}},
		{"short", []Frames{{Lo: 0, Hi: 2, Total: 5}, {Lo: 2, Hi: 4, Total: 5}}},
		{"totals differ", []Frames{{Lo: 0, Hi: 2, Total: 4}, {Lo: 2, Hi: 5, Total: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := localComms(t, len(tc.parts))
			errs := make([]error, len(tc.parts))
			var wg sync.WaitGroup
			for i, p := range tc.parts {
				wg.Go(func() {
					s := randomTensor(1, 1, p.Hi-p.Lo, cfg.InChannels, 8, 8)
					_, errs[i] = m.ForwardFrames(context.Background(), s, ts, ehs, ids, p, comms[i])
				})
			}
			wg.Wait()
			for i, err := range errs {
				if !errors.Is(err, ErrFrames) {
					t.Errorf("member %d: err = %v, want ErrFrames", i, err)
				}
			}
		})
	}
	// A sample whose frame count disagrees with its range is rejected before any exchange.
	_, err = m.ForwardFrames(context.Background(), randomTensor(1, 1, 2, cfg.InChannels, 8, 8), ts, ehs, ids,
		Frames{Lo: 0, Hi: 3, Total: 5}, localComms(t, 1)[0])
	if !errors.Is(err, ErrFrames) {
		t.Errorf("err = %v, want ErrFrames", err)
	}
}

// TestContextParallelSteps: two exchanges per res-block and per transformer layer, and
// one segment more than exchanges; for SVD-XT 22 res-blocks and 16 transformer layers.
func TestContextParallelSteps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       string
		h, w      int
		exchanges int
	}{
		{"SVD-XT", `{"num_frames": 25}`, 72, 128, 2*22 + 2*16},
		{"small2", smallConfig2, 8, 8, 2*(2+2+4) + 2*(1+1+2)},
		{"small3", smallConfig3, 10, 6, 2*(4+2+7) + 2*(1+4+1+6+2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seg, ex, err := ContextParallelSteps(parseConfig(t, tc.cfg), tc.h, tc.w)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d segments, %d exchanges", seg, ex)
			if ex != tc.exchanges || seg != ex+1 {
				t.Fatalf("%d segments, %d exchanges; want %d and %d", seg, ex, tc.exchanges+1, tc.exchanges)
			}
		})
	}
}
