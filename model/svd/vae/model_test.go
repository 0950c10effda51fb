package vae

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// randomWeights returns deterministic random weights for every tensor in shapes: norm
// scales near 1, mix factors ~N(0, 1), everything else ~N(0, 0.1²).
func randomWeights(shapes map[string][]int, seed uint64) map[string]*tensor.Dense {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewPCG(seed, 1))
	out := make(map[string]*tensor.Dense, len(names))
	for _, n := range names {
		t := tensor.New(shapes[n]...)
		isNormScale := strings.HasSuffix(n, ".weight") && strings.Contains(n, "norm")
		for i := range t.Data {
			switch {
			case isNormScale:
				t.Data[i] = float32(1 + 0.1*r.NormFloat64())
			case strings.HasSuffix(n, "mix_factor"):
				t.Data[i] = float32(r.NormFloat64())
			default:
				t.Data[i] = float32(0.1 * r.NormFloat64())
			}
		}
		out[n] = t
	}
	return out
}

// randomTensor returns a deterministic tensor with values uniform in [-1, 1).
func randomTensor(seed uint64, shape ...int) *tensor.Dense {
	r := rand.New(rand.NewPCG(seed, 2))
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(2*r.Float64() - 1)
	}
	return t
}

// frames returns frames [from, to) of a [F, ...] tensor.
func frames(t *tensor.Dense, from, to int) *tensor.Dense {
	return t.Rows(from, to).Clone()
}

func allFinite(t *tensor.Dense) bool {
	for _, v := range t.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

func TestDecodeChunks(t *testing.T) {
	m, err := LoadParts(openGolden(t), "", backend(t), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, _ := goldenCase(t, "vae_decode")
	z := in["latents"]
	full, err := m.Decode(z, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		chunk  int
		splits [][2]int // the frame ranges decoded independently
	}{
		{chunk: -1, splits: [][2]int{{0, 3}}},
		{chunk: 3, splits: [][2]int{{0, 3}}},
		{chunk: 7, splits: [][2]int{{0, 3}}},
		{chunk: 2, splits: [][2]int{{0, 2}, {2, 3}}},
		{chunk: 1, splits: [][2]int{{0, 1}, {1, 2}, {2, 3}}},
	}
	// Chunks run concurrently (rowPar > 1) or one after another; either way each chunk
	// must decode exactly as it does alone.
	for _, par := range []int{1, 3} {
		m.rowPar = par
		for _, tt := range tests {
			got, err := m.Decode(z, tt.chunk)
			if err != nil {
				t.Fatalf("chunk %d: %v", tt.chunk, err)
			}
			if !slices.Equal(got.Shape, []int{3, 3, 32, 32}) {
				t.Fatalf("chunk %d: shape %v", tt.chunk, got.Shape)
			}
			if len(tt.splits) == 1 {
				if !tensor.BitEqual(got, full) {
					t.Errorf("chunk %d differs from the full decode", tt.chunk)
				}
				continue
			}
			if d := tensor.RelL2(got, full); d < 1e-3 {
				t.Errorf("chunk %d: rel L2 %.3g to the full decode; the temporal layers should see fewer frames", tt.chunk, d)
			}
			for _, sp := range tt.splits {
				alone, err := m.Decode(frames(z, sp[0], sp[1]), 0)
				if err != nil {
					t.Fatal(err)
				}
				if !tensor.BitEqual(frames(got, sp[0], sp[1]), alone) {
					t.Errorf("chunk %d: frames %v differ from decoding them alone", tt.chunk, sp)
				}
			}
		}
	}
}

func TestEncodeNonSquareAndBatch(t *testing.T) {
	m, err := LoadParts(openGolden(t), "", backend(t), true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	img := randomTensor(7, 2, 3, 24, 40)
	p, err := m.Encode(img)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{2, 4, 12, 20}
	for name, d := range map[string]*tensor.Dense{"mean": p.Mean, "logvar": p.LogVar, "std": p.Std} {
		if !slices.Equal(d.Shape, want) || !allFinite(d) {
			t.Errorf("%s: shape %v (want %v) or not finite", name, d.Shape, want)
		}
	}
	if !slices.Equal(p.Moments.Shape, []int{2, 8, 12, 20}) {
		t.Errorf("moments shape %v", p.Moments.Shape)
	}
	// Images are encoded independently of their batch.
	for i := range 2 {
		alone, err := m.Encode(frames(img, i, i+1))
		if err != nil {
			t.Fatal(err)
		}
		if d := tensor.RelL2(alone.Mean, frames(p.Mean, i, i+1)); d > 1e-6 {
			t.Errorf("image %d: batch vs alone rel L2 %.3g", i, d)
		}
	}
	// std = exp(logvar/2), mean and logvar are the halves of the moments.
	per := 4 * 12 * 20
	for i := range per {
		lv := p.LogVar.Data[i]
		if got, want := p.Std.Data[i], float32(math.Exp(0.5*float64(lv))); math.Abs(float64(got-want)) > 1e-6*float64(want) {
			t.Fatalf("std[%d] = %g, want exp(%g/2) = %g", i, got, lv, want)
		}
		if p.Mean.Data[i] != p.Moments.Data[i] || lv != p.Moments.Data[per+i] {
			t.Fatalf("mean/logvar [%d] are not the moments' halves", i)
		}
	}
}

// TestOtherSizes runs configs unlike the dev one (three levels, one or three layers per
// block, other channel counts, a non-square odd-sized image) with random weights.
func TestOtherSizes(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		image  []int
		latent []int
		frames []int
	}{
		{
			name: "3 levels, 1 layer",
			cfg: Config{InChannels: 3, OutChannels: 2, LatentChannels: 3, LayersPerBlock: 1, SampleSize: 16,
				BlockOutChannels: []int{32, 32, 64}, ScalingFactor: 0.2},
			image: []int{1, 3, 20, 12}, latent: []int{1, 3, 5, 3}, frames: []int{4, 2, 20, 12},
		},
		{
			name: "2 levels, 3 layers, odd size",
			cfg: Config{InChannels: 1, OutChannels: 3, LatentChannels: 2, LayersPerBlock: 3, SampleSize: 16,
				BlockOutChannels: []int{32, 64}, ScalingFactor: 0.2},
			image: []int{1, 1, 9, 14}, latent: []int{1, 2, 4, 7}, frames: []int{2, 3, 8, 14},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			for range cfg.BlockOutChannels {
				cfg.DownBlockTypes = append(cfg.DownBlockTypes, DownEncoderBlock2D)
			}
			shapes, err := ExpectedTensors(cfg)
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(cfg, randomWeights(shapes, 1), backend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			p, err := m.Encode(randomTensor(2, tt.image...))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Mean.Shape, tt.latent) || !allFinite(p.Moments) {
				t.Fatalf("latent shape %v, want %v (or not finite)", p.Mean.Shape, tt.latent)
			}
			nf := tt.frames[0]
			z := tensor.New(append([]int{nf}, tt.latent[1:]...)...)
			for i := range nf {
				copy(z.Data[i*len(p.Mean.Data):], p.Mean.Data)
			}
			out, err := m.Decode(z, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Shape, tt.frames) || !allFinite(out) {
				t.Fatalf("frames shape %v, want %v (or not finite)", out.Shape, tt.frames)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	ck := openGolden(t)
	enc, err := LoadParts(ck, "", backend(t), true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	dec, err := LoadParts(ck, "", backend(t), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	full, err := Load(ck, "", backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if enc.WeightBytes()+dec.WeightBytes() != full.WeightBytes() || enc.WeightBytes() == 0 || dec.WeightBytes() == 0 {
		t.Errorf("weight bytes: encoder %d + decoder %d != full %d", enc.WeightBytes(), dec.WeightBytes(), full.WeightBytes())
	}
	if !enc.HasEncoder() || enc.HasDecoder() || dec.HasEncoder() || !dec.HasDecoder() {
		t.Error("HasEncoder/HasDecoder disagree with the parts loaded")
	}
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"decode without decoder", func() error { _, err := enc.Decode(tensor.New(1, 4, 2, 2), 0); return err }, ErrNoDecoder},
		{"encode without encoder", func() error { _, err := dec.Encode(tensor.New(1, 3, 8, 8)); return err }, ErrNoEncoder},
		{"image channels", func() error { _, err := full.Encode(tensor.New(1, 4, 8, 8)); return err }, ErrInput},
		{"image rank", func() error { _, err := full.Encode(tensor.New(3, 8, 8)); return err }, ErrInput},
		{"latent channels", func() error { _, err := full.Decode(tensor.New(2, 3, 2, 2), 1); return err }, ErrInput},
		{"nil latents", func() error { _, err := full.Decode(nil, 1); return err }, ErrInput},
		{"data length", func() error {
			_, err := full.Encode(&tensor.Dense{Shape: []int{1, 3, 4, 4}, Data: make([]float32, 5)})
			return err
		}, ErrInput},
	}
	for _, tt := range tests {
		if err := tt.run(); !errors.Is(err, tt.want) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.want)
		}
	}
	// New rejects weights that do not match the config.
	cfg := full.Config()
	shapes, _ := ExpectedTensors(cfg)
	ws := randomWeights(shapes, 3)
	delete(ws, "decoder.time_conv_out.bias")
	if _, err := New(cfg, ws, backend(t)); err == nil {
		t.Error("New accepted weights without decoder.time_conv_out.bias")
	}
}

func TestDecodeChunksStreamsDecode(t *testing.T) {
	m, err := LoadParts(openGolden(t), "", backend(t), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, _ := goldenCase(t, "vae_decode")
	z := in["latents"]
	for _, c := range [][2]int{{1, 1}, {2, 2}, {2, 0}} { // {rowPar, chunk}
		par, chunk := c[0], c[1]
		m.rowPar = par
		{
			want, err := m.Decode(z, chunk)
			if err != nil {
				t.Fatal(err)
			}
			var parts []*tensor.Dense
			next := 0
			err = m.DecodeChunks(z, chunk, func(first int, f *tensor.Dense) error {
				if first != next {
					t.Errorf("par %d chunk %d: emitted frame %d, want %d", par, chunk, first, next)
				}
				next += f.Shape[0]
				parts = append(parts, f.Clone())
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tensor.ConcatRows(parts)
			if err != nil {
				t.Fatal(err)
			}
			if !tensor.BitEqual(got, want) {
				t.Errorf("par %d chunk %d: streamed frames differ from Decode", par, chunk)
			}
		}
	}
	stop := errors.New("stop")
	if err := m.DecodeChunks(z, 1, func(int, *tensor.Dense) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("emit error: %v", err)
	}
}
