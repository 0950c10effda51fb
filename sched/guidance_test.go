package sched

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

func TestGuidanceWeightsMatchTorch(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range []struct {
		key        string
		min, max   float32
		frames     int
		torchExact bool
	}{
		{"min1.0_max3.0_T25", 1, 3, 25, true},
		{"min1.0_max3.0_T14", 1, 3, 14, true},
		{"min1.0_max2.5_T2", 1, 2.5, 2, false},
	} {
		t.Run(tc.key, func(t *testing.T) {
			got := GuidanceWeights(tc.min, tc.max, tc.frames)
			if tc.torchExact {
				assertBitEqual(t, "torch linspace", got, v.Torch.Guidance[tc.key])
			}
			// The plain per-element formula of the numpy emulation is at most 1 ulp away.
			np := v.Guidance[tc.key]
			if len(np) != tc.frames {
				t.Fatalf("reference has %d values", len(np))
			}
			for i := range np {
				if d := ulpDiff(got[i], np[i]); d > 1 {
					t.Errorf("[%d] = %v, numpy emulation %v", i, got[i], np[i])
				}
			}
			if got[0] != tc.min || got[tc.frames-1] != tc.max {
				t.Errorf("endpoints %v, %v", got[0], got[tc.frames-1])
			}
		})
	}
}

func TestTorchLinspaceShapes(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 100} {
		got := TorchLinspace(-2, 5, n)
		if len(got) != n {
			t.Fatalf("n=%d: len %d", n, len(got))
		}
		for i := range got {
			want := -2 + 7*float64(i)/float64(max(n-1, 1))
			if math.Abs(float64(got[i])-want) > 1e-6 {
				t.Errorf("n=%d: [%d] = %v, want ≈ %v", n, i, got[i], want)
			}
		}
	}
}

func TestCFGCombinePerFrameAndBatch(t *testing.T) {
	// 2 videos x 2 frames x stride 3.
	u := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	c := make([]float32, len(u))
	for i := range c {
		c[i] = u[i] + 1
	}
	dst := make([]float32, len(u))
	if err := CFGCombine(dst, u, c, []float32{1, 3}, 3); err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 2, 3, 6, 7, 8, 7, 8, 9, 12, 13, 14}
	assertBitEqual(t, "cfg", dst, want)
}

// floatsFromBytes turns fuzz bytes into finite float32 values of moderate size.
func floatsFromBytes(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 1e6 {
			v = float32(i%7) - 3
		}
		out[i] = v
	}
	return out
}

// FuzzStepAliasing checks that Step, PredOriginal, ScaleModelInput and CFGCombine give
// the same bits whether dst is a fresh slice or aliases one of the inputs.
func FuzzStepAliasing(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcd"), uint8(0))
	f.Add(make([]byte, 64), uint8(24))
	e, err := New(DefaultSVDConfig(), 25)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		vals := floatsFromBytes(data)
		n := len(vals) / 2
		if n == 0 {
			return
		}
		k := int(step) % e.NumSteps()
		x0, mo0 := vals[:n], vals[n:2*n]
		type op func(dst, a, b []float32) error
		ops := map[string]op{
			"step":  func(d, a, b []float32) error { return e.Step(d, a, b, k) },
			"pred":  func(d, a, b []float32) error { return e.PredOriginal(d, a, b, k) },
			"scale": func(d, a, b []float32) error { return e.ScaleModelInput(d, b, k) },
			"cfg":   func(d, a, b []float32) error { return CFGCombine(d, a, b, []float32{2.5}, n) },
		}
		for name, fn := range ops {
			want := make([]float32, n)
			if err := fn(want, mo0, x0); err != nil {
				t.Fatal(err)
			}
			for _, alias := range []string{"first", "second"} {
				a, b := append([]float32(nil), mo0...), append([]float32(nil), x0...)
				d := a
				if alias == "second" {
					d = b
				}
				if err := fn(d, a, b); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Float32bits(d[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s aliased to %s input: [%d] = %v, want %v", name, alias, i, d[i], want[i])
					}
				}
			}
		}
	})
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	e, err := New(DefaultSVDConfig(), 25)
	if err != nil {
		t.Fatal(err)
	}
	x, mo := make([]float32, 4096), make([]float32, 4096)
	for i := range x {
		x[i], mo[i] = float32(i%13)-6, float32(i%7)-3
	}
	w := GuidanceWeights(1, 3, 4)
	for name, fn := range map[string]func(){
		"Step":            func() { _ = e.Step(x, mo, x, 3) },
		"PredOriginal":    func() { _ = e.PredOriginal(mo, mo, x, 3) },
		"ScaleModelInput": func() { _ = e.ScaleModelInput(x, x, 3) },
		"CFGCombine":      func() { _ = CFGCombine(mo, x, mo, w, 1024) },
	} {
		if a := testing.AllocsPerRun(20, fn); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}

// Example runs a 4-step SVD Euler loop with a stand-in denoiser and classifier-free
// guidance over 2 frames.
func Example() {
	e, err := New(DefaultSVDConfig(), 4)
	if err != nil {
		panic(err)
	}
	fmt.Printf("sigmas %.4g\n", e.Sigmas)
	fmt.Printf("timesteps %.4f\n", e.Timesteps)
	fmt.Printf("init noise sigma %.6f\n", e.InitNoiseSigma)

	const frames, stride = 2, 3
	g := GuidanceWeights(1, 3, frames)
	latents := make([]float32, frames*stride)
	for i := range latents {
		latents[i] = float32(i%3-1) * e.InitNoiseSigma // noise · init_noise_sigma
	}
	in, uncond, cond := make([]float32, len(latents)), make([]float32, len(latents)), make([]float32, len(latents))
	for k := range e.NumSteps() {
		_ = e.ScaleModelInput(in, latents, k)
		for i, v := range in { // a fake UNet: two branches of v-prediction
			uncond[i], cond[i] = 0.5*v, 0.6*v
		}
		_ = CFGCombine(uncond, uncond, cond, g, stride)
		_ = e.Step(latents, uncond, latents, k)
	}
	fmt.Printf("guidance %v\nfinal %.4f\n", g, latents)
	// Output:
	// sigmas [700 70.54 2.269 0.002 0]
	// timesteps [1.6378 1.0640 0.2048 -1.5537]
	// init noise sigma 700.000732
	// guidance [1 3]
	// final [0.0976 0.0000 -0.0976 0.1962 0.0000 -0.1962]
}
