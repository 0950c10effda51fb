package unetbench

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/unetcost"
	"github.com/vdpp/vdpp/tensor"
)

const smallConfig = `{"block_out_channels": [32, 64], "layers_per_block": 1, "num_attention_heads": [1, 2],
	"down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
	"up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
	"cross_attention_dim": 16, "addition_time_embed_dim": 8, "projection_class_embeddings_input_dim": 24}`

// fakeUNet returns the first OutChannels channels of the sample, or what bad says.
type fakeUNet struct {
	out   int
	clock *fakeClock
	step  time.Duration
	bad   string // "shape", "nan", "error"
	calls int
}

func (f *fakeUNet) Forward(sample, timestep, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	f.calls++
	f.clock.t = f.clock.t.Add(f.step * time.Duration(f.calls)) // call i takes i steps
	if f.bad == "error" {
		return nil, errors.New("device lost")
	}
	b, t, c, h, w := sample.Shape[0], sample.Shape[1], sample.Shape[2], sample.Shape[3], sample.Shape[4]
	if f.bad == "shape" {
		return sample, nil
	}
	o := &tensor.Dense{Shape: []int{b, t, f.out, h, w}, Data: make([]float32, b*t*f.out*h*w)}
	for i := range o.Data {
		o.Data[i] = sample.Data[i%(b*t*c*h*w)]
		if f.bad == "nan" {
			o.Data[i] = float32(math.NaN())
		}
	}
	return o, nil
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func runner(f *fakeUNet, gotDType *string) Runner {
	return Runner{
		Expected: func(unet.Config) (map[string][]int, error) {
			return map[string][]int{"conv_in.weight": {32, 8, 3, 3}, "conv_in.bias": {32}}, nil
		},
		New: func(cfg unet.Config, w map[string]*tensor.Dense, backend, dtype string) (Forwarder, error) {
			if len(w) != 2 || w["conv_in.bias"] == nil {
				return nil, errors.New("weights not passed")
			}
			*gotDType = dtype
			f.out = cfg.OutChannels
			return f, nil
		},
		ReadFile: func(string) ([]byte, error) { return []byte(smallConfig), nil },
		Now:      f.clock.now,
		PeakRSS:  func() int64 { return 42 },
	}
}

func TestRun(t *testing.T) {
	f := &fakeUNet{clock: &fakeClock{t: time.Unix(0, 0)}, step: 10 * time.Millisecond}
	var dtype string
	o := Options{Config: "small.json", Frames: 3, Height: 32, Width: 48, Batch: 2, DType: "bf16", Warmup: 2, Iters: 4, Seed: 7}
	res, err := runner(f, &dtype).Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// Calls 1-2 warm up; calls 3..6 take 30, 40, 50, 60 ms.
	if f.calls != 6 || dtype != "bf16" {
		t.Fatalf("%d calls, dtype %q", f.calls, dtype)
	}
	if res.MedianMS != 45 || res.MinMS != 30 || res.MeanMS != 45 || res.FirstCallS != 0.01 {
		t.Errorf("median %v min %v mean %v first %v", res.MedianMS, res.MinMS, res.MeanMS, res.FirstCallS)
	}
	cfg, _ := unet.ParseConfig("s", []byte(smallConfig))
	cost, _ := unetcost.Count(cfg, unetcost.Shape{Batch: 2, Frames: 3, Height: 4, Width: 6})
	if res.FLOPs != cost.Total || math.Abs(res.TFLOPS-cost.Total/0.045/1e12) > 1e-12 {
		t.Errorf("flops %g tflops %g, want %g and %g", res.FLOPs, res.TFLOPS, cost.Total, cost.Total/0.045/1e12)
	}
	if res.HostPeakRSS != 42 || res.OutputRMS == 0 {
		t.Errorf("rss %d rms %v", res.HostPeakRSS, res.OutputRMS)
	}
}

func TestRunFailures(t *testing.T) {
	cases := []struct {
		bad, want string
	}{{"shape", "output shape"}, {"nan", "not a usable result"}, {"error", "device lost"}}
	for _, tc := range cases {
		f := &fakeUNet{clock: &fakeClock{}, step: time.Millisecond, bad: tc.bad}
		var dtype string
		_, err := runner(f, &dtype).Run(context.Background(), Options{Config: "s", Frames: 2, Height: 16, Width: 16, Batch: 1, DType: "f32", Iters: 2})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.bad, err, tc.want)
		}
	}
	if _, err := (Runner{}).Run(context.Background(), DefaultOptions()); !errors.Is(err, ErrNoModel) {
		t.Errorf("no factory: %v", err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		ok   bool
	}{
		{"default", func(*Options) {}, true},
		{"f16", func(o *Options) { o.DType = "f16" }, true},
		{"fp64", func(o *Options) { o.DType = "f64" }, false},
		{"odd height", func(o *Options) { o.Height = 577 }, false},
		{"no frames", func(o *Options) { o.Frames = 0 }, false},
		{"no iters", func(o *Options) { o.Iters = 0 }, false},
	}
	for _, tc := range cases {
		o := DefaultOptions()
		tc.mod(&o)
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}

func TestRandomWeights(t *testing.T) {
	shapes := map[string][]int{"a.weight": {64, 32, 3, 3}, "norm.weight": {64}, "a.bias": {64}, "mix_factor": {1}}
	w1, w2 := RandomWeights(shapes, 3), RandomWeights(shapes, 3)
	other := RandomWeights(shapes, 4)
	for n := range shapes {
		for i := range w1[n].Data {
			if w1[n].Data[i] != w2[n].Data[i] {
				t.Fatalf("%s not deterministic", n)
			}
		}
	}
	if w1["a.weight"].Data[0] == other["a.weight"].Data[0] {
		t.Errorf("seed ignored")
	}
	if w1["norm.weight"].Data[5] != 1 {
		t.Errorf("norm scale %v, want 1", w1["norm.weight"].Data[5])
	}
	// Variance of a.weight ~ 1/fan_in = 1/288.
	var s float64
	for _, x := range w1["a.weight"].Data {
		s += float64(x) * float64(x)
	}
	if v := s / float64(len(w1["a.weight"].Data)) * 288; v < 0.9 || v > 1.1 {
		t.Errorf("a.weight variance x fan_in = %.3f, want ~1", v)
	}
}
