package pipeline_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

func TestWindowStarts(t *testing.T) {
	for _, c := range []struct {
		frames, size, overlap int
		want                  []int
	}{
		{14, 14, 3, []int{0}},
		{20, 14, 3, []int{0, 6}},
		{56, 14, 3, []int{0, 11, 22, 33, 42}},
		{25, 14, 3, []int{0, 11}},
		{10, 4, 0, []int{0, 4, 6}},
	} {
		got, err := pipeline.Windows{Size: c.size, Overlap: c.overlap, Blend: "linear"}.Starts(c.frames)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Starts(%d) size %d overlap %d = %v, %v; want %v", c.frames, c.size, c.overlap, got, err, c.want)
		}
	}
}

func TestWindowsRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		w      pipeline.Windows
		frames int
	}{
		{"overlap equals window", pipeline.Windows{Size: 4, Overlap: 4, Blend: "cosine"}, 10},
		{"negative overlap", pipeline.Windows{Size: 4, Overlap: -1, Blend: "cosine"}, 10},
		{"too few frames", pipeline.Windows{Size: 14, Overlap: 3, Blend: "cosine"}, 10},
		{"unknown blend", pipeline.Windows{Size: 4, Overlap: 1, Blend: "step"}, 10},
		{"empty window", pipeline.Windows{Size: 0, Blend: "linear"}, 10},
	} {
		if err := c.w.Validate(c.frames); !errors.Is(err, pipeline.ErrWindows) {
			t.Errorf("%s: %v, want ErrWindows", c.name, err)
		}
	}
}

func TestWindowWeights(t *testing.T) {
	for _, blend := range []string{"linear", "cosine"} {
		w := pipeline.Windows{Size: 8, Overlap: 3, Blend: blend}
		mid := w.Weights(true, true)
		for i, v := range mid {
			if v <= 0 || v > 1 {
				t.Fatalf("%s: weight %d = %v", blend, i, v)
			}
		}
		if mid[0] >= mid[1] || mid[1] >= mid[2] || mid[2] >= mid[3] || mid[3] != 1 || mid[7] != mid[0] {
			t.Errorf("%s: weights %v do not ramp over the overlap", blend, mid)
		}
		if first := w.Weights(false, true); first[0] != 1 || first[7] != mid[7] {
			t.Errorf("%s: first window %v", blend, first)
		}
	}
}

// stepOnce runs one Euler step of the frame-independent synthetic model on a latent of the
// given frames, with or without windows.
func stepOnce(t *testing.T, frames int, w *pipeline.Windows, guided bool) *tensor.Dense {
	t.Helper()
	sc, err := sched.New(sched.DefaultSVDConfig(), 4)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := tensor.New(2, frames, 2, 3, 3)
	for i := range x.Data {
		x.Data[i] = float32(r.NormFloat64()) * 10
	}
	it := &pipeline.Item{Samples: []int64{0, 1}, Latent: x, Cond: []model.Conditioning{nil, nil}, Step: 1}
	if guided {
		it.Guidance = sched.GuidanceWeights(2, 2, frames)
		if w != nil {
			w.Guidance = sched.GuidanceWeights(2, 2, w.Size)
		}
	}
	st := &pipeline.Stepper{Model: synth(t), Sched: sc, Windows: w}
	if err := st.Step(context.Background(), it); err != nil {
		t.Fatal(err)
	}
	return it.Latent
}

// TestWindowedStepMatchesWhole: for a model whose frames are independent, blending the
// windows' steps must give the whole step (every window computes the same values for a
// shared frame); for a latent within one window, the bits must not change at all.
func TestWindowedStepMatchesWhole(t *testing.T) {
	for _, guided := range []bool{false, true} {
		for _, blend := range []string{"linear", "cosine"} {
			whole := stepOnce(t, 23, nil, guided)
			win := stepOnce(t, 23, &pipeline.Windows{Size: 7, Overlap: 2, Blend: blend}, guided)
			for i := range whole.Data {
				if d := math.Abs(float64(whole.Data[i] - win.Data[i])); d > 1e-5*max(1, math.Abs(float64(whole.Data[i]))) {
					t.Fatalf("guided %v %s: element %d: windowed %v, whole %v", guided, blend, i, win.Data[i], whole.Data[i])
				}
			}
		}
		same := stepOnce(t, 7, &pipeline.Windows{Size: 7, Overlap: 2, Blend: "cosine"}, guided)
		if !tensor.BitEqual(same, stepOnce(t, 7, nil, guided)) {
			t.Errorf("guided %v: a latent of one window changed bits under Windows", guided)
		}
	}
}

// A multistep solver (UniPC, Wan's) steps a windowed latent with one state for the whole
// latent: for a model whose frames are independent, several windowed steps give the whole
// run's latents, with two experts and a guidance row per expert sliced per window; a latent
// of one window keeps its bits.
func TestWindowsMultistepMatchesWhole(t *testing.T) {
	cfg, err := sched.ParseUniPCConfig([]byte(`{"prediction_type": "flow_prediction", "use_flow_sigmas": true,
		"flow_shift": 3.0, "solver_order": 2, "solver_type": "bh2", "final_sigmas_type": "zero"}`))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 5
	run := func(frames int, w *pipeline.Windows) *tensor.Dense {
		u, err := sched.NewUniPC(cfg, steps)
		if err != nil {
			t.Fatal(err)
		}
		st := &pipeline.Stepper{Sched: u, Experts: []pipeline.Expert{
			{Steps: pipeline.Range{Start: 0, End: 2}, Model: synth(t)},
			{Steps: pipeline.Range{Start: 2, End: steps}, Model: synth(t), GuidanceRow: 1},
		}}
		r := rand.New(rand.NewPCG(3, 4))
		x := tensor.New(1, frames, 2, 3, 3)
		for i := range x.Data {
			x.Data[i] = float32(r.NormFloat64())
		}
		g := make([]float32, 2*frames)
		for i := range g {
			g[i] = float32(3 + i/frames) // 3 on the first expert's steps, 4 on the second's
		}
		it := &pipeline.Item{Samples: []int64{0}, Latent: x, Cond: []model.Conditioning{nil}, Guidance: g, Windows: w}
		for it.Step = 0; it.Step < steps; it.Step++ {
			if err := st.Step(context.Background(), it); err != nil {
				t.Fatal(err)
			}
		}
		return it.Latent
	}
	for _, blend := range []string{"linear", "cosine"} {
		whole := run(13, nil)
		win := run(13, &pipeline.Windows{Size: 5, Overlap: 2, Blend: blend})
		for i := range whole.Data {
			if d := math.Abs(float64(whole.Data[i] - win.Data[i])); d > 1e-5*max(1, math.Abs(float64(whole.Data[i]))) {
				t.Fatalf("%s: element %d: windowed %v, whole %v", blend, i, win.Data[i], whole.Data[i])
			}
		}
	}
	if !tensor.BitEqual(run(5, &pipeline.Windows{Size: 5, Overlap: 2, Blend: "cosine"}), run(5, nil)) {
		t.Error("a latent of one window changed bits under Windows")
	}
}

// An item's windows travel in its hand-off.
func TestItemMessageWindows(t *testing.T) {
	it := &pipeline.Item{Group: 1, Samples: []int64{0}, Latent: tensor.New(1, 9, 1, 1, 1),
		Windows: &pipeline.Windows{Size: 4, Overlap: 1, Blend: "cosine", Guidance: []float32{1, 2, 3, 4}}}
	back, err := pipeline.ItemFromMessage(it.ToMessage())
	if err != nil {
		t.Fatal(err)
	}
	if w := back.Windows; w == nil || w.Size != 4 || w.Overlap != 1 || w.Blend != "cosine" || !slices.Equal(w.Guidance, it.Windows.Guidance) {
		t.Fatalf("windows %+v after the hand-off, want %+v", back.Windows, it.Windows)
	}
	it.Windows = &pipeline.Windows{Size: 12, Overlap: 1, Blend: "linear"}
	if _, err := pipeline.ItemFromMessage(it.ToMessage()); !errors.Is(err, pipeline.ErrWindows) {
		t.Fatalf("windows longer than the latent: %v, want ErrWindows", err)
	}
}
