package transformer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/tensor"
)

// sliceAxis copies [lo, hi) of axis ax of x.
func sliceAxis(x *tensor.Dense, ax, lo, hi int) *tensor.Dense {
	outer := 1
	for _, d := range x.Shape[:ax] {
		outer *= d
	}
	n := x.Shape[ax]
	inner := x.Len() / (outer * n)
	shape := slices.Clone(x.Shape)
	shape[ax] = hi - lo
	out := tensor.New(shape...)
	for o := range outer {
		copy(out.Data[o*(hi-lo)*inner:(o+1)*(hi-lo)*inner], x.Data[(o*n+lo)*inner:(o*n+hi)*inner])
	}
	return out
}

// evenFrames cuts frames (whole patches of pt) over size members, larger shards first.
func evenFrames(frames, pt, size int) []Frames {
	r, err := HeadRanges(frames/pt, size) // the same even cut
	if err != nil {
		panic(err)
	}
	out := make([]Frames, size)
	for i, g := range r {
		out[i] = Frames{Lo: g[0] * pt, Hi: g[1] * pt, Total: frames}
	}
	return out
}

// forwardCP runs ForwardFrames on len(parts) in-process members and returns their outputs.
func forwardCP(t *testing.T, m *Model, parts []Frames, hidden, ts, ehs, img *tensor.Dense) []*tensor.Dense {
	t.Helper()
	size := len(parts)
	trs := comm.NewLocal(size, comm.Options{RecvTimeout: 30 * time.Second})
	outs := make([]*tensor.Dense, size)
	errs := make([]error, size)
	sh := patchGrid(m.Config(), hidden.Shape)
	var wg sync.WaitGroup
	for i, part := range parts {
		g, err := comm.NewGroup(trs[i], slices.Collect(func(yield func(int) bool) {
			for r := range size {
				if !yield(r) {
					return
				}
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		local := sliceAxis(hidden, 2, part.Lo, part.Hi)
		lts := ts
		if len(ts.Shape) == 2 && ts.Shape[1] > 1 { // one t per token
			per := sh.H * sh.W / m.Config().PatchSize[0]
			lts = sliceAxis(ts, 1, part.Lo*per, part.Hi*per)
		}
		wg.Go(func() {
			outs[i], errs[i] = m.ForwardFrames(context.Background(), local, lts, ehs, img, part, g)
			if errs[i] != nil {
				trs[i].Close()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return outs
}

// checkCP compares every member's output with the whole forward's frames.
func checkCP(t *testing.T, m *Model, whole *tensor.Dense, parts []Frames, hidden, ts, ehs, img *tensor.Dense) {
	t.Helper()
	outs := forwardCP(t, m, parts, hidden, ts, ehs, img)
	for i, part := range parts {
		want := sliceAxis(whole, 2, part.Lo, part.Hi)
		if !slices.Equal(outs[i].Shape, want.Shape) {
			t.Fatalf("member %d: shape %v, want %v", i, outs[i].Shape, want.Shape)
		}
		rel := tensor.RelL2(outs[i], want)
		t.Logf("%d members, member %d frames [%d, %d): rel L2 %.3g", len(parts), i, part.Lo, part.Hi, rel)
		if rel > 1e-5 {
			t.Fatalf("%d members, member %d: rel L2 %.3g > 1e-5", len(parts), i, rel)
		}
	}
}

// Ulysses over 2 and 3 members matches the one-rank forward within 1e-5 on the wan-dev
// experts (3 frames: uneven shards) and on the committed reference configs (per-token
// timesteps, the image branch with pos_embed, patch (2, 2, 1) with 4 heads over 3 members:
// uneven heads).
func TestForwardFramesCases(t *testing.T) {
	type c struct{ name, weights, variant, inputs string }
	var cases []c
	dir := goldenDir(t)
	for _, name := range []string{"transformer", "transformer_2"} {
		cases = append(cases, c{name, filepath.Join(dir, name), "", filepath.Join(dir, "cases", name+"_forward", "inputs.safetensors")})
	}
	refs, _ := filepath.Glob(filepath.Join("testdata", "ref", "*"))
	for _, r := range refs {
		cases = append(cases, c{filepath.Base(r), r, "fp16", filepath.Join(r, "inputs.safetensors")})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.weights, tc.variant, goldentest.Backend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			in := goldentest.ReadTensors(t, tc.inputs)
			hidden, ts, ehs, img := in["hidden_states"], in["timestep"], in["encoder_hidden_states"], in["encoder_hidden_states_image"]
			pt := m.Config().PatchSize[0]
			if f := hidden.Shape[2]; f%pt != 0 { // shards hold whole patches
				hidden = sliceAxis(hidden, 2, 0, f-f%pt)
				if len(ts.Shape) == 2 && ts.Shape[1] > 1 {
					t.Fatal("per-token timesteps with trailing frames")
				}
			}
			whole, err := m.Forward(hidden, ts, ehs, img)
			if err != nil {
				t.Fatal(err)
			}
			patches := hidden.Shape[2] / pt
			for size := 2; size <= 3; size++ {
				if size > patches || size > m.Config().NumAttentionHeads {
					continue
				}
				checkCP(t, m, whole, evenFrames(hidden.Shape[2], pt, size), hidden, ts, ehs, img)
			}
		})
	}
}

// randomModel builds a transformer of cfg with random weights.
func randomModel(t *testing.T, cfg Config, seed uint64) *Model {
	t.Helper()
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	w := map[string]*tensor.Dense{}
	for name, shape := range exp {
		d := tensor.New(shape...)
		for i := range d.Data {
			d.Data[i] = float32(r.NormFloat64() * 0.2)
		}
		w[name] = d
	}
	m, err := New(cfg, w, goldentest.Backend(t))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func randDense(r *rand.Rand, shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

// A config the reference data does not have: 6 heads over 4 members (2, 2, 1, 1 heads),
// 5 frames (2, 1, 1, 1 frames), a non-square grid and two rows with their own timesteps.
func TestForwardFramesUneven(t *testing.T) {
	cfg := Config{PatchSize: [3]int{1, 2, 2}, NumAttentionHeads: 6, AttentionHeadDim: 12, InChannels: 3,
		OutChannels: 5, TextDim: 16, FreqDim: 16, FFNDim: 40, NumLayers: 2, CrossAttnNorm: true,
		QKNorm: "rms_norm_across_heads", Eps: 1e-6, RopeMaxSeqLen: 64}
	m := randomModel(t, cfg, 3)
	defer m.Close()
	r := rand.New(rand.NewPCG(4, 5))
	hidden := randDense(r, 2, 3, 5, 6, 4)
	ts := &tensor.Dense{Shape: []int{2}, Data: []float32{900, 120}}
	ehs := randDense(r, 2, 7, 16)
	whole, err := m.Forward(hidden, ts, ehs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{2, 4, 5} {
		checkCP(t, m, whole, evenFrames(5, 1, size), hidden, ts, ehs, nil)
	}
}

// Shards that do not fit are one clear error: more members than heads, a shard that is not
// whole patches, a latent that disagrees with its shard.
func TestForwardFramesRejects(t *testing.T) {
	cfg := Config{PatchSize: [3]int{2, 2, 2}, NumAttentionHeads: 2, AttentionHeadDim: 12, InChannels: 3,
		OutChannels: 3, TextDim: 16, FreqDim: 16, FFNDim: 40, NumLayers: 1, CrossAttnNorm: true,
		QKNorm: "rms_norm_across_heads", Eps: 1e-6, RopeMaxSeqLen: 64}
	m := randomModel(t, cfg, 3)
	defer m.Close()
	r := rand.New(rand.NewPCG(4, 5))
	ts := &tensor.Dense{Shape: []int{1}, Data: []float32{500}}
	ehs := randDense(r, 1, 4, 16)
	three := comm.NewLocal(3, comm.Options{RecvTimeout: time.Second})
	g3, err := comm.NewGroup(three[0], []int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	two := comm.NewLocal(2, comm.Options{RecvTimeout: time.Second})
	g2, err := comm.NewGroup(two[0], []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		frames int
		part   Frames
		comm   Comm
	}{
		{"heads", 2, Frames{Lo: 0, Hi: 2, Total: 6}, g3},
		{"patch", 3, Frames{Lo: 0, Hi: 3, Total: 6}, g2},
		{"shard", 4, Frames{Lo: 0, Hi: 2, Total: 6}, g2},
	} {
		_, err := m.ForwardFrames(context.Background(), randDense(r, 1, 3, c.frames, 4, 4), ts, ehs, nil, c.part, c.comm)
		if !errors.Is(err, ErrFrames) {
			t.Errorf("%s: err %v, want ErrFrames", c.name, err)
		} else {
			t.Log(err)
		}
	}
	if _, err := HeadRanges(5, 2); err != nil || fmt.Sprint(mustHeads(t, 5, 2)) != "[[0 3] [3 5]]" {
		t.Errorf("HeadRanges(5, 2) = %v, %v", mustHeads(t, 5, 2), err)
	}
}

func mustHeads(t *testing.T, heads, size int) [][2]int {
	r, err := HeadRanges(heads, size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
