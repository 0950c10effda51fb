package clip

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// randomWeights returns deterministic random weights ~N(0, 0.1²) (LayerNorm scales near 1).
func randomWeights(shapes map[string][]int, seed uint64) map[string]*tensor.Dense {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewPCG(seed, 1))
	out := map[string]*tensor.Dense{}
	for _, n := range names {
		t := tensor.New(shapes[n]...)
		for i := range t.Data {
			t.Data[i] = float32(0.1 * r.NormFloat64())
		}
		out[n] = t
	}
	return out
}

func randomTensor(seed uint64, shape ...int) *tensor.Dense {
	r := rand.New(rand.NewPCG(seed, 2))
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}

// TestActivations compares each supported hidden_act with its formula evaluated in float64.
func TestActivations(t *testing.T) {
	xs := []float32{-6, -3.5, -1.702, -1, -0.3, 0, 1e-3, 0.5, 1, 2.25, 4, 8}
	tests := []struct {
		name string
		ref  func(x float64) float64
	}{
		{"gelu", func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }},
		{"gelu_python", func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }},
		{"quick_gelu", func(x float64) float64 { return x / (1 + math.Exp(-1.702*x)) }},
		{"gelu_new", func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}},
		{"gelu_pytorch_tanh", func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			act, err := activation(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := nn.NewProgram(backend(t), nil, tt.name, func(_ nn.Scope, in []*graph.Node) []*graph.Node {
				return []*graph.Node{act(in[0])}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			out, err := p.Run(&tensor.Dense{Shape: []int{len(xs)}, Data: xs})
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range xs {
				want := tt.ref(float64(x))
				if d := math.Abs(float64(out[0].Data[i]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("%s(%g) = %g, want %g", tt.name, x, out[0].Data[i], want)
				}
			}
		})
	}
	if _, err := activation("relu6"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("relu6: error %v, want ErrUnsupported", err)
	}
}

// TestOtherConfig runs a config unlike the dev one (quick_gelu, one channel, other sizes,
// batch 2) with random weights, and checks that images are encoded independently and that
// last_hidden_state is the pre-post_layernorm encoder output.
func TestOtherConfig(t *testing.T) {
	cfg := Config{HiddenSize: 24, IntermediateSize: 40, ProjectionDim: 8, NumHiddenLayers: 3,
		NumAttentionHeads: 3, NumChannels: 1, ImageSize: 15, PatchSize: 5, HiddenAct: "quick_gelu", LayerNormEps: 1e-5}
	shapes, err := ExpectedTensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws := randomWeights(shapes, 4)
	ws[PositionIDsBuffer] = tensor.New(1, 10) // a stray buffer is dropped
	m, err := New(cfg, ws, backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	px := randomTensor(5, 2, 1, 15, 15)
	emb, last, err := m.Forward(px)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(emb.Shape, []int{2, 8}) || !slices.Equal(last.Shape, []int{2, 10, 24}) {
		t.Fatalf("shapes %v, %v", emb.Shape, last.Shape)
	}
	per := 15 * 15
	for i := range 2 {
		one := &tensor.Dense{Shape: []int{1, 1, 15, 15}, Data: px.Data[i*per : (i+1)*per]}
		e1, _, err := m.Forward(one)
		if err != nil {
			t.Fatal(err)
		}
		got := &tensor.Dense{Shape: []int{1, 8}, Data: emb.Data[i*8 : (i+1)*8]}
		if d := tensor.RelL2(got, e1); d > 1e-6 {
			t.Errorf("image %d: batch vs alone rel L2 %.3g", i, d)
		}
	}
	// image_embeds = visual_projection(post_layernorm(last_hidden_state[:, 0])), in float64.
	lnW, lnB := ws["vision_model.post_layernorm.weight"].Data, ws["vision_model.post_layernorm.bias"].Data
	proj := ws["visual_projection.weight"].Data
	for b := range 2 {
		tok := last.Data[b*10*24 : b*10*24+24]
		var mean, v float64
		for _, x := range tok {
			mean += float64(x) / 24
		}
		for _, x := range tok {
			v += (float64(x) - mean) * (float64(x) - mean) / 24
		}
		for o := range 8 {
			var s float64
			for j, x := range tok {
				s += float64(proj[o*24+j]) * ((float64(x)-mean)/math.Sqrt(v+1e-5)*float64(lnW[j]) + float64(lnB[j]))
			}
			if got := float64(emb.Data[b*8+o]); math.Abs(got-s) > 1e-5*math.Max(1, math.Abs(s)) {
				t.Errorf("image_embeds[%d,%d] = %g, want %g from last_hidden_state", b, o, got, s)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	m, err := Load(openGolden(t), "", backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.WeightBytes() <= 0 || m.Config().HiddenSize != 32 {
		t.Errorf("WeightBytes %d, config %+v", m.WeightBytes(), m.Config())
	}
	for _, in := range []*tensor.Dense{
		nil,
		tensor.New(1, 3, 32, 28), // the position embedding fixes the size
		tensor.New(1, 1, 32, 32),
		tensor.New(3, 32, 32),
		{Shape: []int{1, 3, 32, 32}, Data: make([]float32, 4)},
	} {
		if _, _, err := m.Forward(in); !errors.Is(err, ErrInput) {
			t.Errorf("input %v: error %v, want ErrInput", in, err)
		}
	}
	cfg := m.Config()
	shapes, _ := ExpectedTensors(cfg)
	ws := randomWeights(shapes, 1)
	ws["vision_model.post_layernorm.bias"] = tensor.New(31)
	if _, err := New(cfg, ws, backend(t)); !errors.Is(err, nn.ErrShapeMismatch) {
		t.Errorf("mis-shaped tensor: error %v, want nn.ErrShapeMismatch", err)
	}
	cfg.HiddenAct = "relu6"
	if _, err := ExpectedTensors(cfg); !errors.Is(err, ErrUnsupported) {
		t.Errorf("relu6: error %v, want ErrUnsupported", err)
	}
}
