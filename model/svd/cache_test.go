package svd

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// cacheFixture is the dev UNet and a guided input of two rows (uncond, cond).
type cacheFixture struct {
	d  *Denoiser
	in model.Input
	r  *rand.Rand
}

var (
	cacheDevOnce sync.Once
	cacheDev     *Pipeline
	cacheDevErr  error
)

func newCacheFixture(t *testing.T, frames int) *cacheFixture {
	t.Helper()
	dir := shared.Require(t, "golden", "dev")
	cacheDevOnce.Do(func() {
		b, err := nn.NewBackend("go")
		if err != nil {
			cacheDevErr = err
			return
		}
		cacheDev, cacheDevErr = Load(dir, "", b, Parts{Denoiser: true})
	})
	if cacheDevErr != nil {
		t.Fatal(cacheDevErr)
	}
	p := cacheDev
	cfg := p.UNetConfig
	c := cfg.InChannels / 2
	r := rand.New(rand.NewPCG(3, 4))
	cond := model.Conditioning{
		KeyImageEmbeddings: randDense(r, 1, 1, cfg.CrossAttentionDim[0]),
		KeyImageLatents:    randDense(r, 1, c, 8, 8),
		KeyAddedTimeIDs:    &tensor.Dense{Shape: []int{1, 3}, Data: []float32{6, 127, 0.02}},
	}
	in := model.Input{Latents: randDense(r, 2, frames, c, 8, 8), Sigma: 1.5, Timestep: 0.1,
		Cond: []model.Conditioning{cond, cond}, Uncond: []bool{true, false}}
	return &cacheFixture{d: &Denoiser{P: p}, in: in, r: r}
}

// call runs one cached call of mode with decision on every row, from states.
func (f *cacheFixture) call(t *testing.T, in model.Input, mode string, decision model.CacheDecision, states []model.CacheState) (*tensor.Dense, *model.CacheCall) {
	t.Helper()
	c := model.NewCacheCall(in.Rows(), decision)
	c.Mode, c.Threshold, c.Branch = mode, 0.05, 0
	for i := range c.Rows {
		c.Rows[i].State = states[i]
	}
	out, err := f.d.PredictCached(context.Background(), in, c)
	if err != nil {
		t.Fatal(err)
	}
	return out, c
}

func statesOf(c *model.CacheCall) []model.CacheState {
	out := make([]model.CacheState, len(c.Rows))
	for i, r := range c.Rows {
		out[i] = r.State
	}
	return out
}

// next is the fixture's input one step later: the latents moved by a fraction eps.
func (f *cacheFixture) next(eps float32) model.Input {
	in := f.in
	in.Latents = f.in.Latents.Clone()
	for i := range in.Latents.Data {
		in.Latents.Data[i] += eps * float32(f.r.NormFloat64())
	}
	in.Sigma, in.Timestep = 1.2, 0.05
	return in
}

// TestPredictCachedModes: per mode, a first call computes whatever it is asked and keeps
// the mode's state; a reusing call on the same input gives Predict's output back (DeepCache's
// shallow call with its own feature, or the kept denoised estimate at the same noise
// level); on the next step's input it gives what the mode reuses, not Predict's output.
func TestPredictCachedModes(t *testing.T) {
	f := newCacheFixture(t, 3)
	ctx := context.Background()
	want, err := f.d.Predict(ctx, f.in)
	if err != nil {
		t.Fatal(err)
	}
	later := f.next(0.3)
	wantLater, err := f.d.Predict(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode  string
		state []string
	}{
		{pipeline.CacheDeep, []string{CacheFeature}},
		{pipeline.CacheStatic, []string{CacheDenoised}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			// No state: a reuse request computes.
			out, c := f.call(t, f.in, tc.mode, model.CacheReuse, make([]model.CacheState, 2))
			if !tensor.BitEqual(out, want) {
				t.Fatalf("first call differs from Predict (rel L2 %.3g)", tensor.RelL2(out, want))
			}
			for i, r := range c.Rows {
				if !r.Computed || !math.IsNaN(r.Value) || len(r.State) != len(tc.state) || r.State[tc.state[0]] == nil {
					t.Fatalf("row %d after a first call: computed %v value %v state %v", i, r.Computed, r.Value, keys(r.State))
				}
			}
			kept := statesOf(c)
			again, c2 := f.call(t, f.in, tc.mode, model.CacheReuse, kept)
			if c2.Rows[0].Computed || c2.Rows[1].Computed {
				t.Fatal("rows with a state computed though asked to reuse")
			}
			if rel := tensor.RelL2(again, want); rel > 1e-5 {
				t.Fatalf("reuse on the same input: rel L2 %.3g from Predict", rel)
			}
			reused, _ := f.call(t, later, tc.mode, model.CacheReuse, kept)
			if rel := tensor.RelL2(reused, wantLater); rel < 1e-3 {
				t.Fatalf("reuse on another step's input gave its own Predict (rel L2 %.3g): nothing was reused", rel)
			}
			computed, c3 := f.call(t, later, tc.mode, model.CacheCompute, kept)
			if !tensor.BitEqual(computed, wantLater) || !c3.Rows[0].Computed {
				t.Fatal("a compute request with a state did not run the whole UNet")
			}
		})
	}
}

func keys(s model.CacheState) []string {
	var out []string
	for k := range s {
		out = append(out, k)
	}
	return out
}

// TestPredictCachedStaticReusesDenoised: a static reuse returns the model output whose
// denoised estimate at the new noise level is the kept one (v-prediction: x̂0 = (x_in -
// σ·v) / √(σ²+1)).
func TestPredictCachedStaticReusesDenoised(t *testing.T) {
	f := newCacheFixture(t, 3)
	_, c := f.call(t, f.in, pipeline.CacheStatic, model.CacheCompute, make([]model.CacheState, 2))
	later := f.next(0.3)
	out, _ := f.call(t, later, pipeline.CacheStatic, model.CacheReuse, statesOf(c))
	s := float64(later.Sigma)
	per := out.Len() / 2
	for r := range 2 {
		x0 := c.Rows[r].State[CacheDenoised].Data
		for i := range per {
			got := (float64(later.Latents.Data[r*per+i]) - s*float64(out.Data[r*per+i])) / math.Sqrt(s*s+1)
			if math.Abs(got-float64(x0[i])) > 1e-4*(1+math.Abs(float64(x0[i]))) {
				t.Fatalf("row %d element %d: the reused output's denoised estimate is %g, kept %g", r, i, got, x0[i])
			}
		}
	}
}

// TestPredictCachedAdaptive: the first block decides. No state: compute (value NaN); the
// same input again: value 0, reused; an input far from the last full call's: value above
// the threshold, computed. Rows decide alone: a row that has no state computes beside one
// that reuses, and each row's output is what it would be alone.
func TestPredictCachedAdaptive(t *testing.T) {
	f := newCacheFixture(t, 3)
	ctx := context.Background()
	want, err := f.d.Predict(ctx, f.in)
	if err != nil {
		t.Fatal(err)
	}
	out, c := f.call(t, f.in, pipeline.CacheFB, model.CacheAuto, make([]model.CacheState, 2))
	if !tensor.BitEqual(out, want) || !c.Rows[0].Computed || !math.IsNaN(c.Rows[0].Value) {
		t.Fatalf("first call: computed %v value %v", c.Rows[0].Computed, c.Rows[0].Value)
	}
	if c.Rows[0].State[CacheProbe] == nil || c.Rows[0].State[CacheDenoised] == nil {
		t.Fatalf("state after a full call: %v", keys(c.Rows[0].State))
	}
	kept := statesOf(c)
	same, c2 := f.call(t, f.in, pipeline.CacheFB, model.CacheAuto, kept)
	if c2.Rows[0].Computed || c2.Rows[0].Value != 0 || c2.Rows[1].Computed {
		t.Fatalf("same input: computed %v value %v", c2.Rows[0].Computed, c2.Rows[0].Value)
	}
	if rel := tensor.RelL2(same, want); rel > 1e-5 {
		t.Fatalf("same input reused: rel L2 %.3g", rel)
	}
	far := f.next(3)
	_, c3 := f.call(t, far, pipeline.CacheFB, model.CacheAuto, kept)
	if !c3.Rows[0].Computed || !(c3.Rows[0].Value > 0.05) {
		t.Fatalf("far input: computed %v value %v", c3.Rows[0].Computed, c3.Rows[0].Value)
	}

	// Row 0 without a state computes, row 1 reuses; each row matches its call alone.
	mixed, c4 := f.call(t, f.in, pipeline.CacheFB, model.CacheAuto, []model.CacheState{nil, kept[1]})
	if !c4.Rows[0].Computed || c4.Rows[1].Computed {
		t.Fatalf("mixed rows: computed %v %v", c4.Rows[0].Computed, c4.Rows[1].Computed)
	}
	for r := range 2 {
		alone := f.in
		alone.Latents, alone.Cond, alone.Uncond = f.in.Latents.Rows(r, r+1), f.in.Cond[r:r+1], f.in.Uncond[r:r+1]
		out, _ := f.call(t, alone, pipeline.CacheFB, model.CacheAuto, []model.CacheState{[]model.CacheState{nil, kept[1]}[r]})
		if !tensor.BitEqual(out, mixed.Rows(r, r+1)) {
			t.Fatalf("row %d differs from its call alone (rel L2 %.3g)", r, tensor.RelL2(out, mixed.Rows(r, r+1)))
		}
	}
}

// TestPredictFramesCached: two context-parallel members take the one-rank decisions and
// outputs (within the CP tolerance) for each mode, over a full call then a reusing one.
func TestPredictFramesCached(t *testing.T) {
	const frames = 5
	f := newCacheFixture(t, frames)
	later := f.next(0.02)
	parts := []model.FramePart{{Lo: 0, Hi: 3, Total: frames}, {Lo: 3, Hi: 5, Total: frames}}
	for _, tc := range []struct {
		mode     string
		decision model.CacheDecision
	}{{pipeline.CacheDeep, model.CacheReuse}, {pipeline.CacheStatic, model.CacheReuse}, {pipeline.CacheFB, model.CacheAuto}} {
		t.Run(tc.mode, func(t *testing.T) {
			_, c := f.call(t, f.in, tc.mode, tc.decision, make([]model.CacheState, 2))
			want, wc := f.call(t, later, tc.mode, tc.decision, statesOf(c))
			trs := comm.NewLocal(2, comm.Options{RecvTimeout: 30 * time.Second})
			outs, calls := make([]*tensor.Dense, 2), make([]*model.CacheCall, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, part := range parts {
				g, err := comm.NewGroup(trs[i], []int{0, 1})
				if err != nil {
					t.Fatal(err)
				}
				part.Comm = g
				wg.Go(func() {
					ctx := context.Background()
					var states []model.CacheState
					for _, in := range []model.Input{f.in, later} {
						local := in
						local.Latents = framesOf(in.Latents, part.Lo, part.Hi)
						cc := model.NewCacheCall(2, tc.decision)
						cc.Mode, cc.Threshold = tc.mode, 0.05
						for r := range cc.Rows {
							if states != nil {
								cc.Rows[r].State = states[r]
							}
						}
						if outs[i], errs[i] = f.d.PredictFramesCached(ctx, local, part, cc); errs[i] != nil {
							return
						}
						states, calls[i] = statesOf(cc), cc
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for i, part := range parts {
				for r := range 2 {
					got, one := calls[i].Rows[r], wc.Rows[r]
					if got.Computed != one.Computed || (tc.decision == model.CacheAuto && math.Abs(got.Value-one.Value) > 1e-5*one.Value) {
						t.Fatalf("member %d row %d: computed %v value %v, one rank %v %v", i, r, got.Computed, got.Value, one.Computed, one.Value)
					}
				}
				if rel := tensor.RelL2(outs[i], framesOf(want, part.Lo, part.Hi)); rel > 1e-5 {
					t.Fatalf("member %d: rel L2 %.3g from one rank", i, rel)
				}
			}
			if tc.decision == model.CacheAuto && wc.Rows[1].Computed {
				t.Fatalf("a small step computed (value %v): the reusing path was not exercised", wc.Rows[1].Value)
			}
		})
	}
}

// TestCacheCost: on the dev config, DeepCache's reuse costs a fraction of a full call that
// grows with the branch (more layers lie above a deeper one); a static reuse costs nothing
// and keeps one latent; the adaptive rule's reuse costs its first block, less than any
// DeepCache reuse.
func TestCacheCost(t *testing.T) {
	dir := shared.Require(t, "golden", "dev")
	desc, err := svdFamily{}.Describe(dir)
	if err != nil {
		t.Fatal(err)
	}
	side := int64(32 / desc.SizeMultiple)
	fr := func(mode string, branch int) family.CacheCost {
		t.Helper()
		c, err := svdFamily{}.CacheCost(dir, pipeline.Cache{Mode: mode, Branch: branch}, []int{3, 4, int(side), int(side)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	latent := 4 * 3 * 4 * side * side
	if c := fr(pipeline.CacheStatic, 0); c.ReuseFraction != 0 || c.StateBytes != latent {
		t.Errorf("static: %+v, want a free reuse keeping one latent (%d bytes)", c, latent)
	}
	prev := 0.0
	for b := range 5 {
		c := fr(pipeline.CacheDeep, b)
		if !(c.ReuseFraction > 0 && c.ReuseFraction < 1) || c.StateBytes <= 0 {
			t.Errorf("deepcache branch %d: %+v", b, c)
		}
		if b > 0 && c.ReuseFraction < prev {
			t.Errorf("deepcache branch %d reuses for %.3f of a call, branch %d for %.3f: a deeper branch runs more", b, c.ReuseFraction, b-1, prev)
		}
		prev = c.ReuseFraction
	}
	if c := fr(pipeline.CacheFB, 0); !(c.ReuseFraction > 0 && c.ReuseFraction < fr(pipeline.CacheDeep, 0).ReuseFraction) || c.StateBytes <= latent {
		t.Errorf("fbcache: %+v", c)
	}
}
